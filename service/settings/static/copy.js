// copy.js gives each "Copy" button (data-copy="ID of a field") its job:
// copy the field's value to the clipboard and say so in the button's
// status region, for screen readers too. Without script the field is
// still read-only and selectable. When the page is left, its secret
// fields are emptied: a page the browser keeps for Back (the back/forward
// cache) then comes back without the secret.
"use strict";
document.querySelectorAll("button[data-copy]").forEach(function (button) {
  button.hidden = false;
  button.addEventListener("click", function () {
    var field = document.getElementById(button.getAttribute("data-copy"));
    var status = document.getElementById(button.getAttribute("data-status"));
    var done = function (text) { if (status) { status.textContent = text; } };
    field.select();
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(field.value).then(
        function () { done("Copied."); },
        function () { done("Select the field and copy it with your keyboard."); });
    } else {
      done(document.execCommand("copy") ? "Copied." : "Select the field and copy it with your keyboard.");
    }
  });
});
window.addEventListener("pagehide", function () {
  document.querySelectorAll("input.secret").forEach(function (field) { field.value = ""; });
});
