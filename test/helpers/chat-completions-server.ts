/**
 * A local HTTP server speaking the OpenAI chat-completions wire format, standing in for an LLM (no
 * model can run here). Each test decides the answer per request: a status code and a body, a verdict
 * wrapped as a real completion, garbage, or no answer at all (slow). Every request is recorded.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: {
    model?: string;
    temperature?: number;
    messages?: { role: string; content: string }[];
  };
}

export type Answer =
  | { verdict: { safe: boolean; reason: string } | Record<string, unknown>; fenced?: boolean }
  | { status: number; body: string; contentType?: string }
  /** Never answers; the client's timeout has to end it. */
  | { hang: true };

export interface ChatCompletionsServer {
  url: string;
  requests: RecordedRequest[];
  answer: (request: RecordedRequest) => Answer;
  close(): Promise<void>;
}

export function completion(content: string): string {
  return JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'test-model',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

/** The user message: the code the gate sent. */
export function sentCode(request: RecordedRequest): string {
  return request.body.messages?.find((m) => m.role === 'user')?.content ?? '';
}

export async function startChatCompletionsServer(): Promise<ChatCompletionsServer> {
  const hanging = new Set<ServerResponse>();
  const state: ChatCompletionsServer = {
    url: '',
    requests: [],
    answer: () => ({ verdict: { safe: true, reason: 'ordinary handler' } }),
    close: async () => {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let body: RecordedRequest['body'] = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body'];
      } catch {
        // Recorded as empty; the test asserts on it.
      }
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
      };
      state.requests.push(recorded);
      const answer = state.answer(recorded);
      if ('hang' in answer) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      if ('verdict' in answer) {
        const json = JSON.stringify(answer.verdict);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(completion(answer.fenced ? `\`\`\`json\n${json}\n\`\`\`` : json));
        return;
      }
      res.writeHead(answer.status, { 'content-type': answer.contentType ?? 'application/json' });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return state;
}
