//! The rewriting of a kept series' labels before they reach the model: the
//! [`LabelSanitizer`] that compaction and discovery answers both apply, and
//! [`KeepLabels`], the sanitizer that keeps labels as returned.

use std::collections::BTreeMap;

use crate::ConnectorError;

/// Rewrites the labels of a kept series before they reach the model.
///
/// The Manus connector replaces instance addresses with opaque references here. A
/// closure `Fn(&mut BTreeMap<String, String>) -> Result<(), ConnectorError>` is a
/// sanitizer too. Only the kept (top-k) series are sanitized, and the labels common to
/// every series once, as a map of their own (a sanitizer rewrites each label by its
/// name and value alone).
pub trait LabelSanitizer {
    /// Rewrites one series' labels in place.
    fn sanitize(&self, labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError>;
}

impl<F> LabelSanitizer for F
where
    F: Fn(&mut BTreeMap<String, String>) -> Result<(), ConnectorError>,
{
    fn sanitize(&self, labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError> {
        self(labels)
    }
}

/// The sanitizer that keeps labels as returned (Clinic, Wetech).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepLabels;

impl LabelSanitizer for KeepLabels {
    fn sanitize(&self, _labels: &mut BTreeMap<String, String>) -> Result<(), ConnectorError> {
        Ok(())
    }
}
