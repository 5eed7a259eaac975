//! What a successful answer becomes: the compact evidence of a query, or the answer of a
//! discovery, and how either takes its place in a result.

use evidence_result::{Details, Discovery, Evidence, Item, Origin, QueryId, RequestDigest};

/// The answer of one locked query: evidence, or a discovery's answer when the query
/// answers a discovery.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A query's compact evidence.
    Evidence(Evidence),
    /// A discovery's answer.
    Discovery(Discovery),
}

impl Answer {
    /// The successful batch item of this answer.
    pub fn item(self, query_id: QueryId, request_digest: Option<RequestDigest>) -> Item {
        match self {
            Answer::Evidence(e) => Item::success(query_id, request_digest, e),
            Answer::Discovery(d) => Item::discovered(query_id, request_digest, d),
        }
    }

    /// The successful details of a single operation with this answer.
    pub fn details(
        self,
        origin: Origin,
        query_id: QueryId,
        request_digest: RequestDigest,
    ) -> Details {
        match self {
            Answer::Evidence(e) => Details::success(origin, query_id, request_digest, e),
            Answer::Discovery(d) => Details::discovered(origin, query_id, request_digest, d),
        }
    }

    /// Applies `text` to every text of the answer the provider or the model wrote and
    /// the tool does not otherwise sanitize (warnings, a discovery's selector, the
    /// provider's metadata of its names): Manus
    /// seals the addresses in them.
    pub fn map_texts(mut self, text: impl Fn(&str) -> String) -> Self {
        match &mut self {
            Answer::Evidence(e) => {
                for w in &mut e.warnings {
                    *w = text(w);
                }
            }
            Answer::Discovery(d) => {
                for w in &mut d.warnings {
                    *w = text(w);
                }
                d.selector = text(&d.selector);
                for m in d.metadata.iter_mut().flat_map(|m| m.names.iter_mut()) {
                    for t in [&mut m.metric_type, &mut m.unit, &mut m.help]
                        .into_iter()
                        .flatten()
                    {
                        *t = text(t);
                    }
                }
            }
        }
        self
    }
}
