//! The dashboard's routes: `GET /` (the fleet), `GET /clusters/{name}`, `GET
//! /previews/{number}` (a pull request's preview, with `run --previews`), `GET /events` (a
//! server-sent event whenever a new status is published) and the stylesheet and script the
//! pages link to, all from the binary.
//!
//! # Guarantees
//! - Guarded as `/status` is (the same [`Caller`]): a page shows what `/status` shows. The
//!   assets hold no data and are served to anyone, as `/healthz` is.
//! - A page is drawn only when asked for; a pass with no page open pays one counter increment.
//!   `/events` holds a connection and writes a few bytes per status published, and ends
//!   before [`super::CONNECTION_LIFETIME`] (the browser reconnects on its own).
//! - A cluster's name or a pull request's number from the path is only looked up.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};

use super::limits::StreamPermit;
use super::{Api, Caller, Peer};
use crate::dashboard::{self, assets};

/// How long one `/events` stream lasts: less than a connection is served, so the stream ends
/// cleanly and the browser's `EventSource` connects again.
const EVENTS_LIFETIME: Duration = Duration::from_secs(45);

/// How soon the browser reconnects after a stream ends.
const RECONNECT_AFTER: Duration = Duration::from_millis(500);

/// Pages change with every status: no cache may keep them.
const NO_STORE: (header::HeaderName, &str) = (header::CACHE_CONTROL, "no-store");

pub(super) async fn fleet(_caller: Caller, State(api): State<Arc<Api>>) -> Response {
    let page = api.board.draw(dashboard::fleet_page);
    ([NO_STORE], Html(page)).into_response()
}

pub(super) async fn cluster(
    _caller: Caller,
    State(api): State<Arc<Api>>,
    Path(name): Path<String>,
) -> Response {
    match api.board.draw(|view| dashboard::cluster_page(view, &name)) {
        Ok(page) => ([NO_STORE], Html(page)).into_response(),
        Err(not_found) => (StatusCode::NOT_FOUND, [NO_STORE], Html(not_found)).into_response(),
    }
}

pub(super) async fn preview(
    _caller: Caller,
    State(api): State<Arc<Api>>,
    Path(number): Path<String>,
) -> Response {
    let drawn = match number.parse::<u64>() {
        Ok(pull) => api.board.draw(|view| dashboard::preview_page(view, pull)),
        Err(_) => Err(dashboard::not_found_page(
            "such pull request",
            api.board.generation(),
        )),
    };
    match drawn {
        Ok(page) => ([NO_STORE], Html(page)).into_response(),
        Err(not_found) => (StatusCode::NOT_FOUND, [NO_STORE], Html(not_found)).into_response(),
    }
}

/// How soon a browser refused a stream (too many open) asks again.
const RETRY_REFUSED: &str = "10";

/// `event: status`, `data: <generation>` now and whenever a new status is published (a burst
/// of statuses is one event: the receiver keeps only the latest). Past the stream caps
/// ([`super::limits`]), 503 and the connection closed.
pub(super) async fn events(
    _caller: Caller,
    State(api): State<Arc<Api>>,
    Extension(Peer(client)): Extension<Peer>,
) -> Response {
    match api.streams.open(client) {
        Ok(permit) => stream(&api, permit).into_response(),
        Err(refused) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [
                (header::RETRY_AFTER, RETRY_REFUSED),
                (header::CONNECTION, "close"),
                NO_STORE,
            ],
            format!("{refused}\n"),
        )
            .into_response(),
    }
}

/// The stream of [`events`], holding `permit` until it ends.
fn stream(
    api: &Api,
    permit: StreamPermit,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>> + use<>> {
    let receiver = api.board.watch_generation();
    let deadline = tokio::time::Instant::now() + EVENTS_LIFETIME;
    let stream = futures_util::stream::unfold((receiver, true), move |(mut receiver, first)| {
        // Held by the stream, so its place is freed when the stream ends.
        let _held = &permit;
        async move {
            if !first {
                match tokio::time::timeout_at(deadline, receiver.changed()).await {
                    Ok(Ok(())) => {}
                    // Time is up, or the board is gone.
                    _ => return None,
                }
            }
            let generation = *receiver.borrow_and_update();
            let mut event = Event::default()
                .event("status")
                .data(generation.to_string());
            if first {
                event = event.retry(RECONNECT_AFTER);
            }
            Some((Ok(event), (receiver, false)))
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

pub(super) async fn css() -> Response {
    asset("text/css; charset=utf-8", assets::stylesheet())
}

pub(super) async fn js() -> Response {
    asset("text/javascript; charset=utf-8", assets::JS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}
