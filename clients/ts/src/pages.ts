import type { CallOptions } from "@connectrpc/connect";

/**
 * ListMethod is a list RPC of a client made with createClient, such as
 * `contacts.listContacts` or `leads.listLeads`: its request has a `cursor`
 * and its response one repeated field (the items) and a `pagination`
 * whose `nextCursor` is set while more items follow.
 */
// The request is `any` so that the method's own parameter type
// (MessageInitShape of its input) is the one `pages` checks `request`
// against, through Parameters<M>.
export type ListMethod = (request: any, options?: CallOptions) => Promise<{ pagination?: { nextCursor?: string } }>;

/**
 * PageItem is the element type of the one repeated field of a list
 * response: Contact for ListContactsResponse, Lead for ListLeadsResponse.
 */
export type PageItem<Res> = {
  [K in keyof Res]-?: K extends "$unknown" | "$typeName" ? never : Res[K] extends readonly (infer E)[] ? E : never;
}[keyof Res];

/**
 * pages calls a list RPC page after page, passing each response's
 * `pagination.nextCursor` as the next request's `cursor`, and yields
 * every item of every page, once, in the server's order, until a page
 * comes without a `nextCursor`. The request's other fields (limit as the
 * page size, filters, sort) are sent with every page; a `cursor` in it is
 * where the walk starts. options (headers, signal, timeoutMs) apply to
 * each call. Breaking out of the loop stops the walk: no further page is
 * asked for.
 *
 * The items are found by shape, without naming the RPC: the response's
 * one repeated field (`contacts`, `leads`).
 *
 * @example
 *   const contacts = createClient(ContactService, transport);
 *   for await (const c of pages(contacts.listContacts, { limit: 100, sort: "createdAt" })) {
 *     console.log(c.id, c.email);
 *   }
 */
export async function* pages<M extends ListMethod>(
  method: M,
  request: Parameters<M>[0],
  options?: CallOptions,
): AsyncGenerator<PageItem<Awaited<ReturnType<M>>>, void, undefined> {
  const seen = new Set<string>();
  let cursor: string = (request as { cursor?: string } | undefined)?.cursor ?? "";
  for (;;) {
    const res = await method({ ...(request as object), cursor }, options);
    for (const item of itemsOf(res)) {
      yield item as PageItem<Awaited<ReturnType<M>>>;
    }
    const next = res.pagination?.nextCursor;
    if (!next) {
      return;
    }
    // A server that hands out a cursor twice would make this walk
    // forever and yield the same items again.
    if (seen.has(next)) {
      throw new Error(`pages: the server returned the cursor ${JSON.stringify(next)} twice`);
    }
    seen.add(next);
    cursor = next;
  }
}

// itemsOf returns the one repeated field of a list response.
function itemsOf(res: object): readonly unknown[] {
  const lists = Object.entries(res).filter(([key, value]) => key !== "$unknown" && Array.isArray(value));
  if (lists.length !== 1) {
    const typeName = (res as { $typeName?: string }).$typeName ?? "the response";
    throw new TypeError(`pages: ${typeName} has ${lists.length} repeated fields; a list response has exactly one`);
  }
  return lists[0][1] as readonly unknown[];
}
