/**
 * A broker or git URL may carry a password; a message that leaves sless (a log line, a status, an
 * API answer) never does. `withoutPassword` cuts the URL's password, as written and decoded, out of a
 * message.
 */
export function withoutPassword(url: string, message: string): string {
  let password: string;
  try {
    password = new URL(url).password;
  } catch {
    return message;
  }
  if (!password) return message;
  let out = message;
  for (const form of new Set([decodeURIComponent(password), password]))
    out = out.split(form).join('[redacted]');
  return out;
}
