// The storefront's cart: items, quantities and the total shown at checkout.

const TAX_RATES = { standard: 0.2, reduced: 0.05, zero: 0 };

export class Cart {
  constructor(currency = "EUR") {
    this.currency = currency;
    this.lines = new Map();
  }

  add(sku, price, quantity = 1, rate = "standard") {
    if (!(rate in TAX_RATES)) {
      throw new Error(`unknown tax rate ${rate}`);
    }
    const line = this.lines.get(sku) ?? { sku, price, quantity: 0, rate };
    line.quantity += quantity;
    this.lines.set(sku, line);
    return line;
  }

  remove(sku, quantity = Infinity) {
    const line = this.lines.get(sku);
    if (line === undefined) {
      return false;
    }
    line.quantity -= Math.min(quantity, line.quantity);
    if (line.quantity === 0) {
      this.lines.delete(sku);
    }
    return true;
  }

  subtotal() {
    let sum = 0;
    for (const line of this.lines.values()) {
      sum += line.price * line.quantity;
    }
    return Math.round(sum * 100) / 100;
  }

  tax() {
    let sum = 0;
    for (const line of this.lines.values()) {
      sum += line.price * line.quantity * TAX_RATES[line.rate];
    }
    return Math.round(sum * 100) / 100;
  }

  total() {
    return Math.round((this.subtotal() + this.tax()) * 100) / 100;
  }

  format(amount) {
    return new Intl.NumberFormat("en-GB", { style: "currency", currency: this.currency }).format(amount);
  }

  summary() {
    const rows = [];
    for (const line of this.lines.values()) {
      rows.push(`${line.quantity} x ${line.sku}: ${this.format(line.price * line.quantity)}`);
    }
    rows.push(`Subtotal: ${this.format(this.subtotal())}`);
    rows.push(`Tax: ${this.format(this.tax())}`);
    rows.push(`Total: ${this.format(this.total())}`);
    return rows.join("\n");
  }
}

export function parseQuantity(text) {
  const value = Number.parseInt(String(text).trim(), 10);
  if (!Number.isFinite(value) || value < 1 || value > 99) {
    throw new RangeError(`a quantity is a whole number from 1 to 99, not ${text}`);
  }
  return value;
}

export function discount(cart, code) {
  const codes = { WELCOME10: 0.1, SPRING15: 0.15 };
  const share = codes[code.toUpperCase()];
  if (share === undefined) {
    return { applied: false, amount: 0 };
  }
  const amount = Math.round(cart.subtotal() * share * 100) / 100;
  return { applied: true, amount };
}
