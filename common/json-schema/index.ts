/** The JSON Schema subset of tool parameters and structured outputs: check, validate, generate. */
export { checkJsonSchema, SUPPORTED_KEYWORDS, type SchemaProblem } from './check-schema';
export { validateInstance, isValidInstance, type InstanceProblem } from './validate-instance';
export { generateInstance, SchemaGenerationError } from './generate-instance';
export { formatPath, type PathSegment } from './schema-path';
