// capstan's dashboard, live: /events says when a new status exists; the page then fetches
// itself again and swaps in the newer <main>. Without this script every page is whole
// (reload to refresh).
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var live = document.getElementById("live");
  var shown = document.body.getAttribute("data-generation");
  var fetching = false;
  var again = false;

  function say(text) {
    if (live) {
      live.textContent = text;
    }
  }

  function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    fetch(window.location.href, { cache: "no-store", credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (text) {
        var next = new DOMParser().parseFromString(text, "text/html");
        var main = next.getElementById("main");
        var current = document.getElementById("main");
        if (main && current) {
          // What the reader opened stays open.
          var opened = [];
          current.querySelectorAll("details").forEach(function (details, index) {
            if (details.open) {
              opened.push(index);
            }
          });
          main.querySelectorAll("details").forEach(function (details, index) {
            if (opened.indexOf(index) >= 0) {
              details.open = true;
            }
          });
          current.replaceWith(document.importNode(main, true));
          shown = main.getAttribute("data-generation");
          document.body.setAttribute("data-generation", shown);
          say("live · updated " + new Date().toLocaleTimeString());
        }
      })
      .catch(function () {
        say("live · the last update failed, retrying on the next change");
      })
      .then(function () {
        fetching = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var events = new EventSource("/events");
  events.addEventListener("open", function () {
    say("live");
  });
  events.addEventListener("status", function (event) {
    if (event.data !== shown) {
      refresh();
    }
  });
  events.addEventListener("error", function () {
    say("live · reconnecting");
  });
})();
