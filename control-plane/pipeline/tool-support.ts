/**
 * Tools on vLLM and SGLang need the model's tool-call parser (`--tool-call-parser`, with
 * `--enable-auto-tool-choice` on vLLM), which the catalog states per model (`toolCallParser`) and
 * the engine container is started with (providers/kubernetes/engine-container.ts). Without one the
 * engine answers its own raw 400 ("auto" tool choice requires --enable-auto-tool-choice…), or,
 * for `required`, text that no client can parse: the request is refused here instead, naming the
 * field, before it is admitted or reaches an engine.
 */
import type { CatalogModel } from '../catalog/catalog';
import { AppError } from '../errors/app-error';
import { TOOL_PARSER_CATALOG_ENGINE_KINDS } from '../../common/engine-kinds';

export function refuseToolsWithoutParser(entry: CatalogModel | undefined, fields: Record<string, unknown>): void {
  if (!entry || entry.toolCallParser !== undefined || !(TOOL_PARSER_CATALOG_ENGINE_KINDS as readonly string[]).includes(entry.engine)) return;
  const asksForTools = Array.isArray(fields.tools) && fields.tools.length > 0;
  const choice = fields.tool_choice;
  if (asksForTools && choice !== 'none') {
    throw new AppError('invalid_request', `tools are not supported by '${entry.id}': the catalog states no tool-call parser for it on ${entry.engine}; remove tools (or set tool_choice to "none")`, { param: 'tools' });
  }
  if (choice !== undefined && choice !== null && choice !== 'none') {
    throw new AppError('invalid_request', `tool_choice ${JSON.stringify(choice).slice(0, 100)} is not supported by '${entry.id}': the catalog states no tool-call parser for it on ${entry.engine}`, { param: 'tool_choice' });
  }
}
