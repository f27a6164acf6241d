import { type Server, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { errorBody } from "../../shared/errors.ts";

/**
 * Node refuses a request it cannot parse (headers over its 16 KB limit, malformed HTTP) before any
 * app sees it, with a bare status line. This answers those as every other error: JSON, with a code.
 */
export function answerClientErrorsAsJson(server: Server): void {
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
    if (error.code === "ECONNRESET" || !socket.writable) return void socket.destroy();
    const [status, code, message] =
      error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "header_too_large", "The request's headers are larger than the server accepts (16 KB in all)."]
        : [400, "malformed_http", "The request is not valid HTTP."];
    const body = JSON.stringify(errorBody(code, message));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
}
