const ms = require('ms');

// CommonJS works too. `ms` comes from package.json, installed at build time with `npm ci`.
exports.handle = (event) => {
  const duration = event.query?.in ?? '90s';
  const millis = ms(String(duration));
  if (millis === undefined) {
    return { statusCode: 400, body: { error: `cannot parse duration "${duration}"` } };
  }
  return { duration, milliseconds: millis, human: ms(millis, { long: true }) };
};
