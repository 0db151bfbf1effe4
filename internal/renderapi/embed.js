/*
 * usher embed script: turns Asymptote source on any page into figures.
 *
 *   <script src="https://usher.example/embed.js" defer></script>
 *   <pre class="asy">draw(unitcircle);</pre>
 *
 * Each element matching the selector (default "pre.asy"; set
 * data-selector on the script tag to change it) is sent to the server
 * that served this script (POST /api/render) and replaced by the figure as
 * an <img> of its permanent URL. When the figure fails, the element stays
 * and asy's message is shown after it. Options on the script tag:
 * data-selector, data-format (svg or png; default svg), data-timeout (the
 * time limit in milliseconds, which picks the duration tier; default: the
 * server's default task). An element may set data-format and data-timeout
 * itself. No dependencies.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script) return;
  var base = new URL(script.src, document.baseURI);
  var selector = script.getAttribute("data-selector") || "pre.asy";
  var defaultFormat = script.getAttribute("data-format") || "svg";
  var defaultTimeout = script.getAttribute("data-timeout") || "";

  function showError(el, text) {
    var box = document.createElement("pre");
    box.className = "asy-error";
    box.setAttribute("role", "alert");
    box.style.cssText = "color:#a00;border-left:3px solid #a00;padding-left:.5em;white-space:pre-wrap";
    box.textContent = text;
    el.setAttribute("data-asy-state", "error");
    el.parentNode.insertBefore(box, el.nextSibling);
  }

  function render(el) {
    if (el.getAttribute("data-asy-state")) return;
    el.setAttribute("data-asy-state", "rendering");
    var format = el.getAttribute("data-format") || defaultFormat;
    var timeout = el.getAttribute("data-timeout") || defaultTimeout;
    var url = new URL("/api/render?format=" + encodeURIComponent(format) +
      (timeout ? "&timeout=" + encodeURIComponent(timeout) : ""), base);
    fetch(url, { method: "POST", headers: { "Content-Type": "text/plain" }, body: el.textContent })
      .then(function (resp) {
        if (resp.ok) {
          var loc = resp.headers.get("Content-Location");
          var img = document.createElement("img");
          img.className = "asy-figure";
          img.alt = el.textContent;
          img.src = new URL(loc, base).href;
          img.setAttribute("data-asy-state", "done");
          el.parentNode.replaceChild(img, el);
          return;
        }
        return resp.json().then(function (b) {
          showError(el, (b.error || "render failed") + (b.output ? "\n" + b.output : ""));
        }, function () {
          showError(el, "render failed: HTTP " + resp.status);
        });
      })
      .catch(function (e) {
        showError(el, "render failed: " + e.message);
      });
  }

  function run() {
    var els = document.querySelectorAll(selector);
    for (var i = 0; i < els.length; i++) render(els[i]);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();
