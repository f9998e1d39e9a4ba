// Type checks of customFields (run by `npm run build`, which compiles
// examples/ under tsc --strict): with the workspace's field types given,
// each mistake below is a compile error, or the build fails on the
// unused @ts-expect-error.
import { customFields, type CustomFieldValueMap } from "@svat/partnerapi-client";

type LeadFields = { budget: number; interest: "crm" | "erp"; topics: ("price" | "demo")[] };

export const ok: CustomFieldValueMap = customFields.toValues<LeadFields>({ budget: 1, interest: null, topics: ["demo"] });
// @ts-expect-error budget is a number.
customFields.toValues<LeadFields>({ budget: "25000" });
// @ts-expect-error interest is crm or erp.
customFields.toValues<LeadFields>({ interest: "other" });
// @ts-expect-error colour is not a field.
customFields.toValues<LeadFields>({ colour: "red" });
// @ts-expect-error topics holds option values.
customFields.toValues<LeadFields>({ topics: ["gold"] });

const read = customFields.fromValues<LeadFields>(ok);
export const budget: number | undefined = read.budget;
// @ts-expect-error a record may hold no value for a field.
export const sure: number = read.budget;
// Without the types, any key, values of the API's shapes.
export const loose: string | number | boolean | string[] | undefined = customFields.fromValues(ok)["anything"];
