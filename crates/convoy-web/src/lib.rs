//! convoy-web: the data service's web view, served by `convoy serve
//! --http ADDR`.
//!
//! * a JSON API: `/api/me`, `/api/vehicles` (registry + last state),
//!   `/api/positions` (GeoJSON points), `/api/track?vehicle=V` (GeoJSON
//!   line, last 24 h by default), `/api/uploads` (the uploads table),
//!   `/api/requests` (requests to vehicles and their progress; `POST`
//!   with an operator's token issues one);
//! * `/api/events`: Server-Sent Events, one `change` per catalog change,
//!   which the page turns into live updates;
//! * `/files/VEHICLE/NAME`: the stored bytes with HTTP Range and CORS, so
//!   Foxglove opens an MCAP file straight from the server;
//! * `/`: the page (Leaflet map on an offline Natural Earth basemap, the
//!   vehicles and uploads tables), and its vendored assets.
//!
//! Every `/api` and `/files` request carries a token: `Authorization:
//! Bearer T`, or the HttpOnly cookie `POST /api/login` sets (the page,
//! EventSource and download links use that), never the URL. A vehicle's
//! token sees only that vehicle, an operator's all or, when scoped, one;
//! tokens expire and are read-only ([`token`]).
//! Tokens come from `convoy fleet token NAME` ([`token`]).
//!
//! The server is hyper on a tokio runtime of its own: HTTP/1.1 with
//! keep-alive, HTTP/2 (by ALPN over TLS, by prior knowledge in the
//! clear), gzip for JSON, TLS through rustls (`WebConfig::tls`), and
//! bounds on what a client may hold ([`server`]).
//!
//! Without a token: `/healthz` (the process serves), `/readyz` (the
//! catalog answers) and `/metrics` (Prometheus text format).

mod api;
mod assets;
mod body;
pub mod campaigns;
pub mod exporter;
mod http;
pub mod metrics;
mod positions;
pub mod range;
mod requests;
mod server;
pub mod tls;
pub mod token;

pub use http::{ChangeSignal, Web, WebConfig};
