/**
 * Function logs: the stdout and stderr of a function's runtime, from local processes or from pods.
 */

export interface LogLine {
  /** When sless (or the kubelet) saw the line, RFC 3339. */
  time: string;
  /** Which copy wrote it: the pod name on kube, `{function}-{revision}` locally. */
  instance: string;
  /** `stdout` or `stderr` where the platform can tell them apart; pods/log merges both as `output`. */
  stream: 'stdout' | 'stderr' | 'output';
  line: string;
}

export interface LogReadOptions {
  /** Lines from the end to start with (per instance on kube, as `kubectl logs --tail`). */
  tail: number;
  /** Keep streaming new lines until `signal` aborts. */
  follow: boolean;
  signal: AbortSignal;
}

export interface FunctionLogReader {
  /** Lines of one function, oldest first; with `follow`, ends only when the signal aborts. */
  read(namespace: string, name: string, options: LogReadOptions): AsyncIterable<LogLine>;
}
