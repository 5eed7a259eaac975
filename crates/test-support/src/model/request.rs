//! One chat-completions request as the scripted model received it: the session headers
//! OpenCode sends, the messages (system prompt, user text, the assistant's earlier tool
//! calls and the tool results that answered them) and the tools offered, read leniently
//! from the OpenAI chat format so that a script can choose its reply from them and a
//! test can assert on them afterwards.

use serde::Deserialize;
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt (the agent's prompt and the runtime's additions).
    System,
    /// The user, or the agent that delegated the task.
    User,
    /// The model: earlier replies, with the tool calls they made.
    Assistant,
    /// A tool result answering one tool call.
    Tool,
    /// Any other role.
    #[serde(other)]
    Other,
}

/// A tool call the model made in an earlier reply, as the client sends it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeCall {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments text, exactly as the client sends it.
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text: a string content as is, the text parts of an array content joined
    /// without separator, empty when there is none.
    pub content: String,
    /// The tool calls of an assistant message.
    pub tool_calls: Vec<MadeCall>,
    /// The call a tool message answers.
    pub tool_call_id: Option<String>,
}

/// A tool the client offers the model.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    /// The tool name, as the model must call it.
    pub name: String,
    /// The description the model reads.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
}

/// A tool call of an earlier reply with the result the client answered it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The call.
    pub call: MadeCall,
    /// The tool message's text, exactly as the model reads it.
    pub output: String,
}

/// A recorded `POST /v1/chat/completions` request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    session_id: Option<String>,
    parent_session_id: Option<String>,
    body: Value,
    messages: Vec<Message>,
    tools: Vec<OfferedTool>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: String,
    #[serde(default)]
    function: WireFunction,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Value,
}

#[derive(Deserialize)]
struct WireMessage {
    role: Role,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Deserialize)]
struct WireTool {
    #[serde(default)]
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    messages: Vec<WireMessage>,
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
}

/// The text of a message content: a string, or the `text` of each part of an array.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

impl ChatRequest {
    /// Reads a request body; `session_id` and `parent_session_id` are the values of
    /// OpenCode's `x-session-id` and `x-parent-session-id` headers. `None` when the
    /// body is not a chat-completions request.
    pub(crate) fn parse(
        body: Value,
        session_id: Option<String>,
        parent_session_id: Option<String>,
    ) -> Option<Self> {
        let wire: WireRequest = serde_json::from_value(body.clone()).ok()?;
        let messages = wire
            .messages
            .into_iter()
            .map(|m| Message {
                role: m.role,
                content: content_text(&m.content),
                tool_calls: m
                    .tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| MadeCall {
                        id: c.id,
                        name: c.function.name,
                        arguments: c.function.arguments,
                    })
                    .collect(),
                tool_call_id: m.tool_call_id,
            })
            .collect();
        let tools = wire
            .tools
            .unwrap_or_default()
            .into_iter()
            .map(|t| OfferedTool {
                name: t.function.name,
                description: t.function.description,
                parameters: t.function.parameters,
            })
            .collect();
        Some(Self {
            session_id,
            parent_session_id,
            body,
            messages,
            tools,
        })
    }

    /// The whole request body.
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// `true` when the client asked for a streamed answer (`"stream": true`).
    pub fn is_streamed(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// The client's session id (OpenCode's `x-session-id`), one per agent session.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The session that started this one (OpenCode's `x-parent-session-id`, set for a
    /// subagent's session).
    pub fn parent_session_id(&self) -> Option<&str> {
        self.parent_session_id.as_deref()
    }

    /// Every message, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The system messages' texts joined by newlines.
    pub fn system_prompt(&self) -> String {
        self.texts(Role::System).join("\n")
    }

    /// The first user message's text: the user's request, or a subagent's task prompt.
    pub fn first_user_text(&self) -> &str {
        self.messages
            .iter()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str())
    }

    fn texts(&self, role: Role) -> Vec<&str> {
        self.messages
            .iter()
            .filter(|m| m.role == role)
            .map(|m| m.content.as_str())
            .collect()
    }

    /// The tools offered, in the client's order.
    pub fn tools(&self) -> &[OfferedTool] {
        &self.tools
    }

    /// The names of the tools offered, in the client's order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// The offered tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&OfferedTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// How many replies of the model the conversation already holds (its assistant
    /// messages): 0 for the first request of a session.
    pub fn replies_so_far(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
    }

    /// Every tool call of earlier replies that has its result, in order.
    pub fn outcomes(&self) -> Vec<ToolOutcome> {
        let mut outcomes = Vec::new();
        for (index, message) in self.messages.iter().enumerate() {
            for call in &message.tool_calls {
                let answer = self.messages[index + 1..]
                    .iter()
                    .take_while(|m| m.role == Role::Tool)
                    .find(|m| m.tool_call_id.as_deref() == Some(call.id.as_str()));
                if let Some(answer) = answer {
                    outcomes.push(ToolOutcome {
                        call: call.clone(),
                        output: answer.content.clone(),
                    });
                }
            }
        }
        outcomes
    }

    /// The result of the call with id `call_id`, when it has arrived.
    pub fn outcome(&self, call_id: &str) -> Option<ToolOutcome> {
        self.outcomes().into_iter().find(|o| o.call.id == call_id)
    }

    /// The results of the last reply's tool calls (those that arrived with this
    /// request), in order; empty when the last message is not a tool result.
    pub fn latest_outcomes(&self) -> Vec<ToolOutcome> {
        let Some(last) = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
        else {
            return Vec::new();
        };
        let ids: Vec<&str> = self.messages[last]
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        self.outcomes()
            .into_iter()
            .filter(|o| ids.contains(&o.call.id.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_results_are_paired_with_their_calls() {
        let body = json!({"model": "m", "stream": true, "messages": [
            {"role": "system", "content": "You are `a`."},
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "write", "arguments": "{\"x\":1}"}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "wrote"},
            {"role": "tool", "tool_call_id": "c1", "content": "read"},
        ], "tools": [{"type": "function", "function": {"name": "read", "description": "d",
                      "parameters": {"type": "object"}}}]});
        let request = ChatRequest::parse(body, Some("s".into()), None).unwrap();
        assert!(request.is_streamed());
        assert_eq!(request.system_prompt(), "You are `a`.");
        assert_eq!(request.first_user_text(), "go");
        assert_eq!(request.tool_names(), ["read"]);
        assert_eq!(request.replies_so_far(), 1);
        let outcomes = request.latest_outcomes();
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[0].call.name, "read");
        assert_eq!(outcomes[0].output, "read");
        assert_eq!(request.outcome("c2").unwrap().call.arguments, "{\"x\":1}");
        assert_eq!(request.session_id(), Some("s"));
    }

    #[test]
    fn a_body_that_is_not_a_chat_request_is_refused() {
        assert!(ChatRequest::parse(json!({"messages": 3}), None, None).is_none());
    }
}
