//! The page and its vendored packages, compiled into the binary.

pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../assets/index.html"),
    },
    Asset {
        path: "/static/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/app.js"),
    },
    Asset {
        path: "/static/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/app.css"),
    },
    Asset {
        path: "/static/leaflet.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/vendor/leaflet.js"),
    },
    Asset {
        path: "/static/leaflet.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/vendor/leaflet.css"),
    },
    Asset {
        path: "/static/topojson-client.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/vendor/topojson-client.min.js"),
    },
    Asset {
        path: "/static/countries-50m.json",
        content_type: "application/json",
        body: include_bytes!("../assets/vendor/countries-50m.json"),
    },
];

pub fn find(path: &str) -> Option<&'static Asset> {
    let path = if path == "/index.html" { "/" } else { path };
    ASSETS.iter().find(|a| a.path == path)
}
