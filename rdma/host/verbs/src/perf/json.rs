//! `--out_json`: the report file perftest 4.5 writes (its own shape, not
//! strict JSON: unquoted keys, trailing commas), the test's description
//! and then its results, rewritten at each result as perftest does.

use super::banner::Banner;
use crate::Error;

/// Writes `{`, the banner's `test_info`, `results` (one object, as
/// [`super::report`] formats it) and `}` to `path`.
pub fn write(path: &str, banner: &Banner, results: &str) -> crate::Result<()> {
    let text = format!("{{\n{}{results}}}\n", banner.json());
    std::fs::write(path, text).map_err(|e| Error::Protocol(format!("cannot write the JSON report {path}: {e}")))
}
