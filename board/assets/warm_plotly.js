// The Runs page draws no chart, so plotly.js is not loaded there. Once that page is idle, load it (it is 4.8 MB of
// script): the browser then has it fetched and compiled before the user opens a page with charts (HParams, Scalars).
(function () {
  var PLOTLY = "_dash-component-suites/plotly/package_data/plotly.min.js";

  function prefix() {
    var config = document.getElementById("_dash-config");
    try {
      return (config && JSON.parse(config.textContent).requests_pathname_prefix) || "/";
    } catch (error) {
      return "/";
    }
  }

  function warm() {
    var base = prefix();
    var path = window.location.pathname;
    if (path !== base && path !== base.replace(/\/$/, "")) return; // the Runs page only
    if (window.Plotly || document.querySelector('script[src*="plotly.min.js"]')) return;
    var script = document.createElement("script");
    script.src = base + PLOTLY;
    script.async = true;
    document.head.appendChild(script);
  }

  window.addEventListener("load", function () {
    var later = window.requestIdleCallback || function (callback) { return setTimeout(callback, 1000); };
    later(warm, { timeout: 5000 });
  });
})();
