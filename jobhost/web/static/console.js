/* jobhost dashboard: live refresh and the time zone switch. The pages work without it.
 *
 * Live: a page whose <body> has data-live="N" is fetched again every N seconds (at least 2;
 * slower when the server is slow to answer, or failing); each element marked data-live is
 * replaced by the one with the same id in the new page. The log of a running run
 * (data-live-tail) asks only for the lines after its last one and appends them. Polling stops
 * while the tab is hidden, while paused (the header's button, per tab), and once the page
 * says it is no longer live (a run that ended).
 *
 * Time: every <time datetime="..."> is shown in the zone picked in the header (UTC, the
 * browser's, or each job's own from data-zone), remembered per browser; a relative time
 * (class "ago") gets its absolute time as its title; class "fixed" keeps its text.
 */
(function () {
  "use strict";

  var ZONE_KEY = "jobhost.zone";
  var PAUSE_KEY = "jobhost.live.paused";
  var MIN_SECONDS = 2;
  var MAX_SECONDS = 60;

  // -- time ------------------------------------------------------------------------------

  function stored(storage, key, fallback) {
    try {
      return storage.getItem(key) || fallback;
    } catch (error) {
      return fallback;
    }
  }

  function store(storage, key, value) {
    try {
      if (value === null) {
        storage.removeItem(key);
      } else {
        storage.setItem(key, value);
      }
    } catch (error) {
      /* private mode: the choice lasts for this page only */
    }
  }

  function zoneMode() {
    var mode = stored(window.localStorage, ZONE_KEY, "utc");
    return mode === "browser" || mode === "job" ? mode : "utc";
  }

  function browserZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch (error) {
      return "UTC";
    }
  }

  function pad(value) {
    return (value < 10 ? "0" : "") + value;
  }

  function pad3(value) {
    return (value < 10 ? "00" : value < 100 ? "0" : "") + value;
  }

  function utcText(date) {
    return date.getUTCFullYear() + "-" + pad(date.getUTCMonth() + 1) + "-" +
      pad(date.getUTCDate()) + " " + pad(date.getUTCHours()) + ":" +
      pad(date.getUTCMinutes()) + ":" + pad(date.getUTCSeconds()) + "Z";
  }

  var formats = {};

  function zonedText(date, zone) {
    if (!zone || zone === "UTC" || zone === "Etc/UTC") {
      return utcText(date);
    }
    try {
      if (!formats[zone]) {
        formats[zone] = new Intl.DateTimeFormat("en-GB", {
          timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit",
          day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
          timeZoneName: "short"
        });
      }
      var parts = {};
      formats[zone].formatToParts(date).forEach(function (part) {
        parts[part.type] = part.value;
      });
      return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" +
        parts.minute + ":" + parts.second + " " + parts.timeZoneName;
    } catch (error) {
      return utcText(date); /* a zone this browser does not know */
    }
  }

  function zoneFor(element, mode) {
    if (mode === "browser") {
      return browserZone();
    }
    if (mode === "job") {
      var owner = element.closest("[data-zone]");
      return owner ? owner.getAttribute("data-zone") : "UTC";
    }
    return "UTC";
  }

  function zoneLabel(element, mode) {
    if (mode === "browser") {
      return "your browser's zone, " + browserZone();
    }
    if (mode === "job") {
      var owner = element.closest("[data-zone]");
      return owner ? "the job's zone, " + owner.getAttribute("data-zone") : "each job's own zone";
    }
    return "UTC";
  }

  function showTimes(root) {
    var mode = zoneMode();
    root.querySelectorAll("time[datetime]").forEach(function (element) {
      var date = new Date(element.getAttribute("datetime"));
      if (isNaN(date.getTime())) {
        return;
      }
      var kind = element.className;
      if (kind === "ms") {
        var zone = zoneFor(element, mode);
        element.textContent = zone === "UTC" ? date.toISOString()
          : zonedText(date, zone).replace(/ (\S+)$/, "." + pad3(date.getMilliseconds()) + " $1");
      } else if (kind === "ago") {
        element.title = zonedText(date, zoneFor(element, mode));
      } else if (kind === "fixed") {
        element.title = utcText(date);
      } else {
        element.textContent = zonedText(date, zoneFor(element, mode));
      }
    });
    root.querySelectorAll("[data-zone-label]").forEach(function (element) {
      element.textContent = zoneLabel(element, mode);
    });
  }

  function setUpZones() {
    var picker = document.getElementById("zone");
    if (!picker) {
      return;
    }
    picker.value = zoneMode();
    picker.addEventListener("change", function () {
      store(window.localStorage, ZONE_KEY, picker.value === "utc" ? null : picker.value);
      showTimes(document);
    });
    var control = document.getElementById("zone-control");
    if (control) {
      control.hidden = false;
    }
    showTimes(document);
  }

  // -- live ------------------------------------------------------------------------------

  var body = document.body;
  var every = Math.max(Number(body.getAttribute("data-live")) || 0, 0);
  var delay = 0;
  var timer = null;
  var busy = false;
  var polls = 0;
  var ended = every === 0;
  var toggle = document.getElementById("live-toggle");
  var state = document.getElementById("live-state");

  function paused() {
    return stored(window.sessionStorage, PAUSE_KEY, "") === "yes";
  }

  function say(text) {
    if (state) {
      state.textContent = text;
      state.setAttribute("data-polls", String(polls));
    }
  }

  function clockText() {
    var now = new Date();
    return pad(now.getHours()) + ":" + pad(now.getMinutes()) + ":" + pad(now.getSeconds());
  }

  function schedule() {
    if (timer !== null) {
      window.clearTimeout(timer);
      timer = null;
    }
    if (ended || paused() || document.hidden) {
      return;
    }
    timer = window.setTimeout(poll, delay * 1000);
  }

  function tailUrl() {
    var log = document.querySelector("[data-live-tail]");
    var url = new URL(window.location.href);
    if (log) {
      var lines = log.querySelectorAll("[data-seq]");
      var last = lines.length ? lines[lines.length - 1].getAttribute("data-seq") : "0";
      url.searchParams.set("after", last);
    }
    return url.toString();
  }

  function poll() {
    timer = null;
    if (busy) {
      return;
    }
    busy = true;
    var started = Date.now();
    fetch(tailUrl(), { credentials: "same-origin", cache: "no-store",
      headers: { "X-Jobhost-Live": "1" } })
      .then(function (response) {
        if (response.redirected && new URL(response.url).pathname !== window.location.pathname) {
          window.location.assign(response.url); /* a trigger's request became its run */
          return null;
        }
        if (!response.ok) {
          throw new Error("the server answered " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null || paused()) {
          return; /* paused while asking: keep the page as it was */
        }
        polls += 1;
        apply(new DOMParser().parseFromString(html, "text/html"));
        var took = (Date.now() - started) / 1000;
        delay = Math.min(Math.max(every, MIN_SECONDS, took * 10), MAX_SECONDS);
        say(ended ? "live: stopped, nothing more to show (" + clockText() + ")"
          : "live: updated " + clockText());
      })
      .catch(function (error) {
        delay = Math.min(Math.max(delay * 2, every, MIN_SECONDS), MAX_SECONDS);
        say("live: " + error.message + "; trying again in " + Math.round(delay) + " s");
      })
      .then(function () {
        busy = false;
        schedule();
      });
  }

  function apply(page) {
    document.querySelectorAll("[data-live]").forEach(function (old) {
      if (!old.id || old === body) {
        return;
      }
      var fresh = page.getElementById(old.id);
      if (!fresh) {
        return;
      }
      if (old.hasAttribute("data-live-tail")) {
        fresh.querySelectorAll("[data-seq]").forEach(function (line) {
          if (!document.getElementById(line.id)) {
            old.appendChild(document.importNode(line, true));
          }
        });
        old.hidden = old.children.length === 0;
        showTimes(old);
        return;
      }
      var made = document.importNode(fresh, true);
      old.replaceWith(made);
      showTimes(made);
    });
    /* A form for a state that ended (a finished backfill's cancel form) is not live, so a reason
       being typed survives a refresh; it goes once the fresh page no longer offers it. */
    document.querySelectorAll("[data-live-gone]").forEach(function (old) {
      if (old.id && !page.getElementById(old.id)) {
        old.remove();
      }
    });
    var next = Number(page.body.getAttribute("data-live")) || 0;
    if (next === 0) {
      ended = true;
      body.setAttribute("data-live", "0");
      if (toggle) {
        toggle.hidden = true;
      }
    }
    if (page.title) {
      document.title = page.title;
    }
  }

  function showToggle() {
    if (!toggle) {
      return;
    }
    toggle.textContent = paused() ? "Resume live" : "Pause live";
    toggle.setAttribute("aria-pressed", paused() ? "true" : "false");
  }

  function setUpLive() {
    var control = document.getElementById("live-control");
    if (ended || !control || !toggle) {
      return;
    }
    control.hidden = false;
    delay = Math.min(Math.max(every, MIN_SECONDS), MAX_SECONDS);
    toggle.addEventListener("click", function () {
      store(window.sessionStorage, PAUSE_KEY, paused() ? null : "yes");
      showToggle();
      say(paused() ? "live: paused" : "live: catching up");
      var wait = delay;
      delay = 0; /* resumed: catch up at once */
      schedule();
      delay = wait;
    });
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !paused() && !ended) {
        delay = 0; /* back in view: catch up at once */
      }
      schedule();
      delay = Math.min(Math.max(every, MIN_SECONDS), MAX_SECONDS);
    });
    showToggle();
    say(paused() ? "live: paused" : "live: every " + delay + " s");
    schedule();
  }

  setUpZones();
  setUpLive();
})();
