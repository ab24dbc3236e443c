/**
 * The single choice of what protects `/v1`, made from the auth settings alone, so that both
 * platforms' start-ups make it the same way.
 */
import type { AuthSettings } from '../../config/auth.js';
import { type Authenticator, NoAuthAuthenticator } from './authenticator.js';
import { createJwtAuthenticator } from './jwt.js';

/** JWT when settings exist; otherwise none (config has already refused that off loopback). */
export function createAuthenticator(settings: AuthSettings | undefined): Authenticator {
  return settings === undefined ? new NoAuthAuthenticator() : createJwtAuthenticator(settings);
}
