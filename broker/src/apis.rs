//! One place per API: the shape of the two fronts' API tables, and what is derived from them.
//!
//! Each front states its APIs once, with `api_table!`: one row per implemented API with its
//! versions and its handler. From that one list the macro emits
//! - the listing, a `&[ApiRange]` in row order, from which the front answers ApiVersions and
//!   refuses everything else with UNSUPPORTED_VERSION (the Kafka codec takes it too, to decide
//!   which bodies it decodes), and
//! - the router, a `match` that calls the row's handler,
//!
//! so an API cannot be listed without a handler or handled without being listed, and no version
//! range is written twice. The tables: [`crate::handlers::NATIVE_APIS`] (port 9093) and
//! [`crate::kafka::KAFKA_APIS`] (port 9092).
//!
//! README.md's API tables are rendered from them by [`crate::api_readme`] (a file above the two
//! fronts, so that this one, which the fronts use, imports neither); a test checks README.md holds
//! exactly that text between the markers, and rewrites it when run with
//! `SPOOL_WRITE_README=1 cargo test -p spool-broker --lib api_readme`.
//!
//! Adding an API to a front: write its handler (native: `handlers/`, Kafka: `kafka/`), add its row
//! to the front's table, regenerate the README. Nothing else lists APIs.

pub use spool_protocol::versions::ApiRange;

/// Declares a front's API table and its router from one list of rows.
///
/// ```text
/// api_table! {
///     /// docs of the table
///     pub const TABLE: [ApiKey];
///     /// docs of the router
///     pub(crate) async fn route(cx: &Call<'_>, body: BodyEnum) -> Reply;
///     // key         versions  body variant(binding) => handler: an expression of type `Reply`
///     Produce        3..=9     Produce(r)            => produce(cx, r).await,
/// }
/// ```
///
/// The router takes the request's key and its decoded body and returns `None` when no row
/// matches both (the front answers UNSUPPORTED_VERSION); matching the key as well as the body
/// keeps a row whose key and body variant disagree from ever being routed. Versions are the
/// front's to check against the table before routing.
macro_rules! api_table {
    (
        $(#[$table_doc:meta])*
        $tvis:vis const $TABLE:ident: [$Key:ident];
        $(#[$route_doc:meta])*
        $rvis:vis async fn $route:ident($cx:ident: $Cx:ty, $body:ident: $Body:ident) -> $Out:ty;
        $( $key:ident $lo:literal ..= $hi:literal $Variant:ident($r:pat) => $handler:expr, )+
    ) => {
        $(#[$table_doc])*
        $tvis const $TABLE: &[$crate::apis::ApiRange<$Key>] = &[
            $( $crate::apis::ApiRange {
                api_key: $Key::$key,
                min_version: $lo,
                max_version: $hi,
            }, )+
        ];

        $(#[$route_doc])*
        $rvis async fn $route($cx: $Cx, api_key: $Key, $body: $Body) -> Option<$Out> {
            match (api_key, $body) {
                $( ($Key::$key, $Body::$Variant($r)) => Some($handler), )+
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }
    };
}
pub(crate) use api_table;
