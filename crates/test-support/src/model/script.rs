//! The scripted model's script: which agent is speaking (a marker of its system
//! prompt), and each agent's play, a function of the request that chooses the reply
//! from what the conversation holds (the replies so far, the tool results that
//! arrived). A request without tools that no agent claims (OpenCode's title request)
//! gets the script's title.

use std::fmt;

use super::reply::Reply;
use super::request::ChatRequest;

/// How an agent answers: one reply per request.
pub trait Play: Send + Sync {
    /// The reply to `request`.
    fn reply(&self, request: &ChatRequest) -> Reply;
}

impl<F> Play for F
where
    F: Fn(&ChatRequest) -> Reply + Send + Sync,
{
    fn reply(&self, request: &ChatRequest) -> Reply {
        self(request)
    }
}

impl Play for Box<dyn Play> {
    fn reply(&self, request: &ChatRequest) -> Reply {
        (**self).reply(request)
    }
}

/// A play of numbered steps: the request with `n` replies so far gets step `n`. Past the
/// last step the request is refused (the script did not expect it).
#[derive(Default)]
pub struct Steps {
    steps: Vec<Box<dyn Play>>,
}

impl fmt::Debug for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Steps({})", self.steps.len())
    }
}

impl Steps {
    /// No steps yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next step.
    pub fn then(mut self, step: impl Play + 'static) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    /// How many steps there are.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// `true` when there are none.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl Play for Steps {
    fn reply(&self, request: &ChatRequest) -> Reply {
        let n = request.replies_so_far();
        match self.steps.get(n) {
            Some(step) => step.reply(request),
            None => Reply::refuse(format!(
                "the script has {} steps and this is reply {}",
                self.steps.len(),
                n + 1
            )),
        }
    }
}

/// Who a request was answered as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Speaker {
    /// The agent of this name (its marker is in the system prompt).
    Agent(String),
    /// A request without tools that no agent claims: OpenCode's title request.
    Title,
    /// Nobody the script knows: refused.
    Unknown,
}

struct Part {
    name: String,
    marker: String,
    play: Box<dyn Play>,
}

/// A script of several agents.
pub struct Script {
    title: String,
    parts: Vec<Part>,
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Script")
            .field("title", &self.title)
            .field(
                "agents",
                &self.parts.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for Script {
    fn default() -> Self {
        Self::new()
    }
}

impl Script {
    /// A script without agents, answering a title request with `Scripted session`.
    pub fn new() -> Self {
        Self {
            title: "Scripted session".to_owned(),
            parts: Vec::new(),
        }
    }

    /// The answer to title requests.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Adds agent `name`, speaking whenever `marker` is in the system prompt (the first
    /// agent added whose marker matches speaks), answering with `play`.
    pub fn agent(
        mut self,
        name: impl Into<String>,
        marker: impl Into<String>,
        play: impl Play + 'static,
    ) -> Self {
        self.parts.push(Part {
            name: name.into(),
            marker: marker.into(),
            play: Box::new(play),
        });
        self
    }

    /// Who speaks in `request`, and the reply.
    pub(crate) fn answer(&self, request: &ChatRequest) -> (Speaker, Reply) {
        let system = request.system_prompt();
        if let Some(part) = self.parts.iter().find(|p| system.contains(&p.marker)) {
            return (Speaker::Agent(part.name.clone()), part.play.reply(request));
        }
        if request.tools().is_empty() {
            return (Speaker::Title, Reply::text(self.title.clone()));
        }
        (
            Speaker::Unknown,
            Reply::refuse("no agent of the script speaks in this system prompt"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(system: &str, replies: usize, tools: bool) -> ChatRequest {
        let mut messages = vec![
            json!({"role": "system", "content": system}),
            json!({"role": "user", "content": "go"}),
        ];
        for i in 0..replies {
            messages.push(json!({"role": "assistant", "content": format!("r{i}")}));
        }
        let tools = if tools {
            json!([{"type": "function", "function": {"name": "read"}}])
        } else {
            json!([])
        };
        ChatRequest::parse(json!({"messages": messages, "tools": tools}), None, None).unwrap()
    }

    #[test]
    fn the_agent_whose_marker_is_in_the_system_prompt_plays_its_step() {
        let script = Script::new()
            .title("T")
            .agent(
                "a",
                "You are `a`",
                Steps::new()
                    .then(|_: &ChatRequest| Reply::text("first"))
                    .then(|_: &ChatRequest| Reply::text("second")),
            )
            .agent("b", "You are `b`", |_: &ChatRequest| Reply::text("b"));
        let (who, reply) = script.answer(&request("You are `a`.", 1, true));
        assert_eq!(who, Speaker::Agent("a".into()));
        assert_eq!(reply, Reply::text("second"));
        assert!(matches!(
            script.answer(&request("You are `a`.", 2, true)).1,
            Reply::Refuse(_)
        ));
        assert_eq!(
            script.answer(&request("You are `b`.", 0, true)).1,
            Reply::text("b")
        );
        assert_eq!(
            script.answer(&request("You are a title generator", 0, false)),
            (Speaker::Title, Reply::text("T"))
        );
        assert_eq!(
            script.answer(&request("You are `c`.", 0, true)).0,
            Speaker::Unknown
        );
    }
}
