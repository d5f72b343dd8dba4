//! Weir's web workbench: the HTML, CSS and JavaScript that the Hub (`weir hub`) and a local run
//! (`weir run --ui`) serve, embedded in the binary with `include_bytes!`, so that neither
//! `cargo run` nor `cargo test` needs Node or any build step.
//!
//! [`router`] serves `GET /` (the page) and `GET /ui/{path}` (its modules, style sheets and the
//! vendored libraries under `assets/vendor/`, see the crate's README for their versions). The
//! page reads the Hub's JSON API (`/api/v1/...`) from the same origin; docs/workbench.md
//! describes what it shows.

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file: its path under `/ui/`, its content type and its bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

macro_rules! asset {
    ($path:literal, $type:expr) => {
        Asset {
            path: $path,
            content_type: $type,
            bytes: include_bytes!(concat!("../assets/", $path)),
        }
    };
}

/// Every file the page loads, by its path under `/ui/`.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("app.css", CSS),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("format.js", JS),
    asset!("jobs.js", JS),
    asset!("editor.js", JS),
    asset!("newjob.js", JS),
    asset!("auth.js", JS),
    asset!("liveness.js", JS),
    asset!("overview.js", JS),
    asset!("metrics-data.js", JS),
    asset!("job.js", JS),
    asset!("graph.js", JS),
    asset!("metrics.js", JS),
    asset!("checkpoints.js", JS),
    asset!("agents.js", JS),
    asset!("notices.js", JS),
    asset!("vendor/dagre.esm.js", JS),
    asset!("vendor/uPlot.esm.js", JS),
    asset!("vendor/uPlot.min.css", CSS),
    asset!("vendor/LICENSE-dagre", TEXT),
    asset!("vendor/LICENSE-uplot", TEXT),
];

/// The workbench's routes: `GET /` and `GET /ui/{path}`; an unknown file is a 404.
pub fn router() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/ui/{*path}", get(file))
}

/// The paths under `/ui/` the router serves, with their content types.
pub fn assets() -> impl Iterator<Item = (&'static str, &'static str)> {
    ASSETS.iter().map(|a| (a.path, a.content_type))
}

fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

fn serve(asset: &'static Asset) -> Response {
    (
        [
            (header::CONTENT_TYPE, asset.content_type),
            // The assets change with the binary: the browser asks again every time (cheap).
            (header::CACHE_CONTROL, "no-cache"),
        ],
        asset.bytes,
    )
        .into_response()
}

async fn index() -> Response {
    match find("index.html") {
        Some(asset) => serve(asset),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn file(Path(path): Path<String>) -> Response {
    match find(&path) {
        Some(asset) => serve(asset),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, TEXT)],
            format!("no workbench file `{path}`"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(uri: &str) -> (StatusCode, String, Vec<u8>) {
        let answer = router()
            .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = answer.status();
        let content_type = answer
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = answer.into_body().collect().await.expect("body").to_bytes();
        (status, content_type, body.to_vec())
    }

    #[tokio::test]
    async fn every_asset_is_served_with_its_type() {
        let (status, content_type, body) = get("/").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, HTML);
        assert!(String::from_utf8_lossy(&body).contains("<script type=\"module\""));
        for asset in ASSETS {
            let (status, content_type, body) = get(&format!("/ui/{}", asset.path)).await;
            assert_eq!(status, StatusCode::OK, "{}", asset.path);
            assert_eq!(content_type, asset.content_type, "{}", asset.path);
            assert_eq!(body, asset.bytes, "{}", asset.path);
            assert!(!body.is_empty(), "{}", asset.path);
        }
        let expected = |path: &str| {
            if path.ends_with(".js") {
                JS
            } else if path.ends_with(".css") {
                CSS
            } else if path.ends_with(".html") {
                HTML
            } else {
                TEXT
            }
        };
        for (path, content_type) in assets() {
            assert_eq!(content_type, expected(path), "{path}");
        }
    }

    #[tokio::test]
    async fn every_module_the_page_imports_is_embedded() {
        // `import ... from "./x.js"` in the modules, and the files index.html names.
        let mut named = Vec::new();
        for asset in ASSETS
            .iter()
            .filter(|a| a.path.ends_with(".js") || a.path.ends_with(".html"))
        {
            let text = String::from_utf8_lossy(asset.bytes);
            for quote in ['"', '\''] {
                for piece in text.split(quote) {
                    if let Some(rest) = piece.strip_prefix("./") {
                        named.push(rest.to_owned());
                    } else if let Some(rest) = piece.strip_prefix("/ui/") {
                        named.push(rest.to_owned());
                    }
                }
            }
        }
        for name in named
            .iter()
            .filter(|n| n.ends_with(".js") || n.ends_with(".css"))
        {
            assert!(
                find(name).is_some(),
                "`{name}` is referenced but not embedded"
            );
        }
    }

    #[tokio::test]
    async fn an_unknown_file_is_not_found() {
        for uri in [
            "/ui/nope.js",
            "/ui/",
            "/ui/vendor/nope.js",
            "/ui/../Cargo.toml",
        ] {
            let (status, ..) = get(uri).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        }
    }
}
