/** Money amounts as a reader expects to see them. */

export interface Amount {
  cents: number;
  currency: string;
}

/** "12.50 EUR" for 1250 cents in euros. */
export function formatAmount(amount: Amount): string {
  const whole = Math.trunc(amount.cents / 100);
  const rest = Math.abs(amount.cents % 100).toString().padStart(2, "0");
  return `${whole}.${rest} ${amount.currency}`;
}

/** The sum of amounts in one currency; mixing currencies is an error. */
export function sum(amounts: Amount[]): Amount {
  const currency = amounts[0]?.currency ?? "EUR";
  if (amounts.some((a) => a.currency !== currency)) {
    throw new Error("cannot add amounts in different currencies");
  }
  return { cents: amounts.reduce((t, a) => t + a.cents, 0), currency };
}
