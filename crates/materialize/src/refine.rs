//! The refinement gate: whether a later adaptive round may run (at most once, for a
//! distinct new question drawn from materialized evidence) and for which query ids.

use std::collections::HashSet;
use std::fmt;

use evidence_result::{QueryId, RequestDigest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Handoff, Outcome};

/// A request for a later adaptive round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefinementRequest {
    /// The new diagnostic question, in plain words.
    pub question: String,
    /// The materialized objectives the question derives from.
    pub derived_from: Vec<QueryId>,
    /// The new query ids the round will use.
    pub query_ids: Vec<QueryId>,
    /// Digests of the round's planned locked requests, when known. One equal to an
    /// earlier attempt's digest is an unchanged retry.
    pub request_digests: Vec<RequestDigest>,
}

/// Why the gate refused a refinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefinementCode {
    /// The one adaptive round was already granted.
    AlreadyRefined,
    /// The question is empty after normalization.
    EmptyQuestion,
    /// The request names no objective it derives from.
    NotDerived,
    /// A named source objective does not exist in the handoff.
    UnknownObjective,
    /// A named source objective ended `failed` or `refused`: refining it would be
    /// argument or query repair, not a new question.
    SourceNotAnswered,
    /// The question matches an existing objective's question after normalization.
    NotDistinct,
    /// The round names no new query id.
    NoQuery,
    /// The round reuses an existing (or repeats its own) query id: that is repair, not a
    /// new question.
    QueryIdReused,
    /// A planned request digest equals an earlier attempt's digest.
    UnchangedRetry,
}

impl RefinementCode {
    /// The snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            RefinementCode::AlreadyRefined => "already_refined",
            RefinementCode::EmptyQuestion => "empty_question",
            RefinementCode::NotDerived => "not_derived",
            RefinementCode::UnknownObjective => "unknown_objective",
            RefinementCode::SourceNotAnswered => "source_not_answered",
            RefinementCode::NotDistinct => "not_distinct",
            RefinementCode::NoQuery => "no_query",
            RefinementCode::QueryIdReused => "query_id_reused",
            RefinementCode::UnchangedRetry => "unchanged_retry",
        }
    }
}

impl fmt::Display for RefinementCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A granted adaptive round. Start its turn with [`crate::Turn::for_refinement`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefinementGrant {
    /// The question, as asked.
    pub question: String,
    /// The objectives it derives from.
    pub derived_from: Vec<QueryId>,
    /// The only query ids the round may use.
    pub query_ids: Vec<QueryId>,
}

/// A refused refinement, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefinementRefusal {
    /// Why.
    pub code: RefinementCode,
    /// The reason in plain words.
    pub reason: String,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefinementDecision {
    /// The round may run.
    Allowed(RefinementGrant),
    /// The round may not run.
    Refused(RefinementRefusal),
}

/// Normalizes a question for comparison: lower case, every run of characters that are
/// not letters or digits becomes one space, trimmed.
pub fn normalize_question(question: &str) -> String {
    let mut out = String::with_capacity(question.len());
    for word in question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// The refinement gate: a later adaptive round is allowed at most once, and only for a
/// distinct new diagnostic question derived from materialized evidence.
///
/// Known questions are the ones registered with [`RefinementGate::with_question`], plus
/// each objective's query id and locked expression: a "question" that restates one of
/// them is repair, not a new question. Known digests are those the handoff keeps (first,
/// last and final attempt of each objective).
#[derive(Debug, Clone)]
pub struct RefinementGate {
    objectives: Vec<(QueryId, Outcome)>,
    questions: HashSet<String>,
    digests: HashSet<RequestDigest>,
    granted: bool,
}

impl RefinementGate {
    /// A gate over a materialized turn.
    pub fn new(handoff: &Handoff) -> Self {
        let mut questions = HashSet::new();
        let mut digests = HashSet::new();
        let mut objectives = Vec::with_capacity(handoff.objectives.len());
        for o in &handoff.objectives {
            objectives.push((o.query_id.clone(), o.outcome));
            questions.insert(normalize_question(o.query_id.as_str()));
            if let Some(expr) = o.details.evidence.as_ref().and_then(|e| e.expr.as_deref()) {
                questions.insert(normalize_question(expr));
            }
            digests.extend(o.attempts.first.request_digest);
            digests.extend(o.attempts.last.as_ref().and_then(|m| m.request_digest));
            digests.extend(o.details.request_digest);
        }
        if let Some(u) = &handoff.unattributed {
            digests.extend(u.first.request_digest);
            digests.extend(u.last.as_ref().and_then(|m| m.request_digest));
        }
        questions.remove("");
        RefinementGate {
            objectives,
            questions,
            digests,
            granted: false,
        }
    }

    /// Registers the diagnostic question an existing objective answered.
    pub fn with_question(mut self, question: &str) -> Self {
        let q = normalize_question(question);
        if !q.is_empty() {
            self.questions.insert(q);
        }
        self
    }

    /// True once the one adaptive round was granted.
    pub fn is_spent(&self) -> bool {
        self.granted
    }

    /// Decides on a refinement. A grant spends the gate.
    pub fn request(&mut self, request: &RefinementRequest) -> RefinementDecision {
        match self.check(request) {
            Ok(()) => {
                self.granted = true;
                RefinementDecision::Allowed(RefinementGrant {
                    question: request.question.clone(),
                    derived_from: request.derived_from.clone(),
                    query_ids: request.query_ids.clone(),
                })
            }
            Err((code, reason)) => RefinementDecision::Refused(RefinementRefusal { code, reason }),
        }
    }

    fn check(&self, request: &RefinementRequest) -> Result<(), (RefinementCode, String)> {
        use RefinementCode::*;
        if self.granted {
            return Err((
                AlreadyRefined,
                "the one later adaptive round was already granted".to_owned(),
            ));
        }
        let question = normalize_question(&request.question);
        if question.is_empty() {
            return Err((EmptyQuestion, "the question is empty".to_owned()));
        }
        if request.derived_from.is_empty() {
            return Err((
                NotDerived,
                "a refinement must name the materialized objectives it derives from".to_owned(),
            ));
        }
        for source in &request.derived_from {
            let outcomes: Vec<Outcome> = self
                .objectives
                .iter()
                .filter(|(q, _)| q == source)
                .map(|(_, o)| *o)
                .collect();
            if outcomes.is_empty() {
                return Err((
                    UnknownObjective,
                    format!("objective {source} does not exist in the materialized evidence"),
                ));
            }
            if let Some(o) = outcomes.iter().find(|o| !o.is_answered()) {
                let o = match o {
                    Outcome::Failed => "failed",
                    _ => "refused",
                };
                return Err((
                    SourceNotAnswered,
                    format!(
                        "objective {source} ended {o}; refining it is argument or query repair, \
                         which belongs to the same-turn correction, not to a new round"
                    ),
                ));
            }
        }
        if self.questions.contains(&question) {
            return Err((
                NotDistinct,
                "the question matches an existing objective's question; a refinement needs a \
                 distinct new diagnostic question"
                    .to_owned(),
            ));
        }
        if request.query_ids.is_empty() {
            return Err((NoQuery, "the round names no new queryId".to_owned()));
        }
        for (i, id) in request.query_ids.iter().enumerate() {
            if self.objectives.iter().any(|(q, _)| q == id) {
                return Err((
                    QueryIdReused,
                    format!(
                        "queryId {id} is an existing objective; reusing it is repair, not a new \
                         question"
                    ),
                ));
            }
            if request.query_ids[..i].contains(id) {
                return Err((QueryIdReused, format!("queryId {id} is named twice")));
            }
        }
        if let Some(d) = request
            .request_digests
            .iter()
            .find(|d| self.digests.contains(d))
        {
            return Err((
                UnchangedRetry,
                format!(
                    "request digest {d} repeats an earlier attempt; an unchanged retry is not refinement"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_ignores_case_punctuation_and_spacing_only() {
        assert_eq!(
            normalize_question("Is  TiKV-memory HIGH?"),
            "is tikv memory high"
        );
        assert_eq!(normalize_question("Größe"), "größe");
        assert_ne!(
            normalize_question("is tikv memory high"),
            normalize_question("is tidb memory high")
        );
        assert_eq!(normalize_question(" ... "), "");
    }
}
