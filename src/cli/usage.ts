/** What the CLI's commands share without loading each other: a usage error and the usage lines. */
export class UsageError extends Error {}

export const VALIDATE_USAGE = 'sless validate [dir] [--path P] [--namespace NS]';
