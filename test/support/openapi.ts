import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

type Operation = { responses: Record<string, { content?: Record<string, { schema: object }> }> };
export type OpenApiDocument = { paths: Record<string, Record<string, Operation>> } & Record<string, unknown>;

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const compiled = new Map<object, ReturnType<Ajv2020["compile"]>>();

/**
 * Checks an answer against the document's schema for that operation and status: what a client
 * generated from the document would expect. Returns the problems ("" when it matches).
 */
export function documentMismatch(
  doc: OpenApiDocument,
  method: string,
  path: string,
  status: number,
  body: unknown,
): string {
  const operation = doc.paths[path]?.[method.toLowerCase()];
  if (!operation) return `${method} ${path} is not in the document`;
  const response = operation.responses[String(status)];
  if (!response) return `${method} ${path} does not document status ${status}`;
  const schema = response.content?.["application/json"]?.schema;
  if (!schema) return `${method} ${path} ${status} documents no JSON body`;
  let validate = compiled.get(schema);
  if (!validate) compiled.set(schema, (validate = ajv.compile(schema)));
  return validate(body) ? "" : `${method} ${path} ${status}: ${ajv.errorsText(validate.errors)}`;
}
