//! Reading what the scripted model recorded: the requests of each agent grouped by
//! OpenCode session, the tool results the model read, and OpenCode's renderings of its
//! built-in tools' results (a file read, a refused write, a call of a tool the agent
//! does not have).

use evidence_test_support::model::{ChatRequest, Exchange, Reply, Speaker, ToolOutcome};

/// How OpenCode answers a tool call its permission rules refuse.
pub const REFUSED: &str =
    "The user has specified a rule which prevents you from using this specific tool call";

/// What OpenCode's `write` tool answers when it wrote.
pub const WROTE: &str = "Wrote file successfully.";

/// The recorded exchanges of one `opencode run`.
pub struct Transcript {
    /// Every exchange, in arrival order.
    pub exchanges: Vec<Exchange>,
}

impl Transcript {
    /// The exchanges answered as `agent`.
    pub fn of(&self, agent: &str) -> Vec<&Exchange> {
        self.exchanges
            .iter()
            .filter(|e| e.speaker == Speaker::Agent(agent.to_owned()))
            .collect()
    }

    /// The sessions of `agent` in the order they started, each as its requests in order.
    pub fn sessions(&self, agent: &str) -> Vec<Vec<&ChatRequest>> {
        let mut sessions: Vec<(Option<&str>, Vec<&ChatRequest>)> = Vec::new();
        for exchange in self.of(agent) {
            let id = exchange.request.session_id();
            match sessions.iter_mut().find(|(s, _)| *s == id) {
                Some((_, requests)) => requests.push(&exchange.request),
                None => sessions.push((id, vec![&exchange.request])),
            }
        }
        sessions.into_iter().map(|(_, r)| r).collect()
    }

    /// The result the model read for call `id`, wherever it was made.
    pub fn outcome(&self, id: &str) -> ToolOutcome {
        self.exchanges
            .iter()
            .rev()
            .find_map(|e| e.request.outcome(id))
            .unwrap_or_else(|| panic!("no result of call {id} reached the model"))
    }

    /// The requests the script could not answer, with the reason.
    pub fn refusals(&self) -> Vec<String> {
        self.exchanges
            .iter()
            .filter_map(|e| match &e.reply {
                Reply::Refuse(reason) => Some(format!("{:?}: {reason}", e.speaker)),
                _ => None,
            })
            .collect()
    }
}

/// The file contents in OpenCode's rendering of a `read` result (`<content>` with
/// numbered lines `N: text`), or `None` when it is not a file's contents (`File not
/// found: ...`).
pub fn read_contents(output: &str) -> Option<String> {
    let body = output.split_once("<content>\n")?.1;
    let body = body
        .rsplit_once("\n\n(End of file")
        .map_or(body, |(body, _)| body);
    let lines: Option<Vec<&str>> = body
        .lines()
        .map(|line| {
            let rest = line.trim_start_matches(|c: char| c.is_ascii_digit());
            rest.strip_prefix(':')
                .map(|r| r.strip_prefix(' ').unwrap_or(r))
        })
        .collect();
    Some(lines?.join("\n"))
}

/// `true` when OpenCode answered `output` for a file that does not exist.
pub fn is_missing_file(output: &str) -> bool {
    output.starts_with("File not found")
}
