// Signing in with a token: when the Hub answers 401, a form asks for the token, stores it in
// sessionStorage (`weir.token`, sent by api.js as `Authorization: Bearer ...`) and the request
// goes again. "Sign out" forgets the token. A Hub without authentication never answers 401, so
// neither appears.

import { clearToken, setToken, setTokenPrompt, token } from "./api.js";
import { h, replace } from "./dom.js";

let pending = null;

/** Shows the form (once for every request waiting); resolves when a token was stored. */
function ask(reason) {
  if (!pending) {
    pending = new Promise((resolve) => showForm(reason, resolve)).finally(() => {
      pending = null;
    });
  }
  return pending;
}

function showForm(reason, resolve) {
  const box = document.getElementById("sign-in");
  const input = h("input", { id: "token-input", "data-testid": "token-input", type: "password",
    autocomplete: "current-password", spellcheck: "false", required: true,
    "aria-describedby": "sign-in-reason" });
  const problem = h("p", { class: "field-error", role: "alert", hidden: true });
  const form = h(
    "form",
    {
      class: "sign-in-form",
      onsubmit: (event) => {
        event.preventDefault();
        const value = input.value.trim();
        if (!value) {
          problem.textContent = "Enter the token the Hub's administrator gave you.";
          problem.hidden = false;
          input.focus();
          return;
        }
        setToken(value);
        box.hidden = true;
        box.replaceChildren();
        renderSignOut();
        resolve();
      },
    },
    h("h2", {}, "Sign in to the Hub"),
    h("p", { id: "sign-in-reason", class: "muted" }, reason),
    h("label", { for: "token-input" }, "Access token"),
    input,
    h("button", { type: "submit", class: "primary", "data-testid": "sign-in" }, "Sign in"),
    problem,
  );
  replace(box, form);
  box.hidden = false;
  input.focus();
}

/** The "Sign out" button of the top bar, shown while a token is stored. */
export function renderSignOut() {
  const button = document.getElementById("sign-out");
  button.hidden = !token();
}

/** Installs the form as api.js's answer to a 401, and the Sign out button. */
export function installAuth() {
  setTokenPrompt(ask);
  document.getElementById("sign-out").addEventListener("click", () => {
    clearToken();
    // Every view reads again, without a token: a Hub that needs one asks for it.
    location.reload();
  });
  renderSignOut();
}
