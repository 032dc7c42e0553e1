import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { AppError } from '../errors/app-error';
import { shortened } from '../errors/quote-value';

/** OpenAI's cursor pagination: at most `limit` items after the one with id `after`. */
export interface PageRequest {
  readonly after?: string;
  readonly limit: number;
}

export interface CursorPage<T> {
  readonly data: T[];
  /** More items follow the last one (ask again with `after` = its id). */
  readonly hasMore: boolean;
}

/**
 * One page of `query` ordered by creation time and id (`desc`: newest first). The cursor is an
 * item of the same listing, found by `findCursor`; an id that is not one is a 400 naming `after`
 * (an id of another workspace is not one, so it reveals nothing).
 */
export async function cursorPage<T extends ObjectLiteral & { id: string; createdAt: Date }>(
  query: SelectQueryBuilder<T>, alias: string, order: 'asc' | 'desc', request: PageRequest,
  findCursor: (id: string) => Promise<T | null>, what: string,
): Promise<CursorPage<T>> {
  if (request.after !== undefined) {
    const cursor = await findCursor(request.after);
    if (!cursor) throw new AppError('invalid_request', `after must be the id of a ${what} in this list; '${shortened(request.after)}' is not`, { param: 'after' });
    query.andWhere(`(${alias}.created_at, ${alias}.id) ${order === 'desc' ? '<' : '>'} (:cursorAt, :cursorId)`, { cursorAt: cursor.createdAt, cursorId: cursor.id });
  }
  const direction = order === 'desc' ? 'DESC' : 'ASC';
  const rows = await query.orderBy(`${alias}.created_at`, direction).addOrderBy(`${alias}.id`, direction).take(request.limit + 1).getMany();
  return { data: rows.slice(0, request.limit), hasMore: rows.length > request.limit };
}
