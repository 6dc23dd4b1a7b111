// orijs_sync dashboard: confirm dialogs for action forms, auto-refresh on demand.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    var body = document.body;
    var every = parseInt(body.getAttribute("data-refresh") || "0", 10);
    if (every > 0) {
      window.setTimeout(function () { window.location.reload(); }, every * 1000);
    }
  });
}());
