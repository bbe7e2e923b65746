//! Test helpers: importing Cherokee text.

use super::import_text;
use crate::Report;

pub(super) fn imp(text: &str) -> (String, Report) {
    let mut r = Report::default();
    let out = import_text("c.conf", text, &mut r).unwrap();
    (crate::emit::write(&out), r)
}
