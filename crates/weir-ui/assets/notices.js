// What the page tells the user outside a view: the error banner (API refusals with their
// status and field) and short confirmations.

import { ApiError } from "./api.js";
import { h, replace } from "./dom.js";

/** Shows an error of the API (or any error) in the banner until it is dismissed. */
export function showError(error, what) {
  const banner = document.getElementById("api-error");
  const text = error instanceof ApiError ? error.describe() : String(error.message || error);
  replace(
    banner,
    h("strong", {}, what ? `${what} failed: ` : "Error: "),
    h("span", { "data-testid": "api-error-message" }, text),
    h("button", { class: "link", onclick: () => clearError(), "aria-label": "Dismiss" }, "×"),
  );
  banner.hidden = false;
}

/** Hides the error banner. */
export function clearError() {
  const banner = document.getElementById("api-error");
  banner.hidden = true;
  banner.replaceChildren();
}

/** A short confirmation at the bottom of the window. */
export function toast(text) {
  const el = document.getElementById("toast");
  el.textContent = text;
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    el.hidden = true;
  }, 4000);
}
