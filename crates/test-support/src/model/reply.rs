//! What the scripted model answers, and how it goes on the wire: the chunks of an
//! OpenAI chat-completions stream (`chat.completion.chunk` objects as SSE `data:` lines,
//! ending `data: [DONE]`), with each tool call's arguments split over two chunks as a
//! streaming model sends them.

use serde_json::{Value, json};

/// A tool call the model makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call id; unique within the session (the tool result names it).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
}

impl ToolCall {
    /// A call of `name` with `arguments`, identified by `id`.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// One reply of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A text answer; the turn ends (`finish_reason: "stop"`).
    Text(String),
    /// Tool calls, made at once; the client runs them and asks again
    /// (`finish_reason: "tool_calls"`).
    ToolCalls(Vec<ToolCall>),
    /// No answer: the request is refused with HTTP 400 and this message (an OpenAI error
    /// object), which a client does not retry. For a script that meets a request it has
    /// no answer for.
    Refuse(String),
}

impl Reply {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// One tool call.
    pub fn call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::ToolCalls(vec![ToolCall::new(id, name, arguments)])
    }

    /// A refusal naming what the script did not expect.
    pub fn refuse(reason: impl Into<String>) -> Self {
        Self::Refuse(reason.into())
    }

    /// The tool calls of this reply (none for a text or a refusal).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Self::ToolCalls(calls) => calls,
            Self::Text(_) | Self::Refuse(_) => &[],
        }
    }
}

/// `text` cut in two at the character boundary nearest its middle.
fn halves(text: &str) -> (&str, &str) {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle -= 1;
    }
    text.split_at(middle)
}

/// The `data:` payloads of the stream answering with `reply` (not for
/// [`Reply::Refuse`], which is not streamed): a chunk per text half or per tool-call
/// half, a last chunk with the finish reason and usage, then `[DONE]`.
pub(crate) fn stream_payloads(reply: &Reply, model: &str, id: &str) -> Vec<String> {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = Vec::new();
    let finish = match reply {
        Reply::Text(text) => {
            let (first, second) = halves(text);
            chunks.push(chunk(json!({"role": "assistant", "content": first}), None));
            if !second.is_empty() {
                chunks.push(chunk(json!({"content": second}), None));
            }
            "stop"
        }
        Reply::ToolCalls(calls) if !calls.is_empty() => {
            for (index, call) in calls.iter().enumerate() {
                let arguments = call.arguments.to_string();
                // A strict prefix of a JSON object is never a complete JSON text, so the
                // client must join the two halves before it has the call.
                let (first, second) = halves(&arguments);
                chunks.push(chunk(
                    json!({"role": "assistant", "tool_calls": [{"index": index, "id": call.id,
                           "type": "function",
                           "function": {"name": call.name, "arguments": first}}]}),
                    None,
                ));
                chunks.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": second}}]}),
                    None,
                ));
            }
            "tool_calls"
        }
        Reply::ToolCalls(_) | Reply::Refuse(_) => {
            chunks.push(chunk(json!({"role": "assistant", "content": ""}), None));
            "stop"
        }
    };
    let mut last = chunk(json!({}), Some(finish));
    last["usage"] = json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
    chunks.push(last);
    let mut payloads: Vec<String> = chunks.iter().map(Value::to_string).collect();
    payloads.push("[DONE]".to_owned());
    payloads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_streams_in_two_halves_that_join_to_its_arguments() {
        let reply = Reply::call("c1", "write", json!({"filePath": "a.json", "content": "é"}));
        let payloads = stream_payloads(&reply, "m", "r1");
        assert_eq!(payloads.last().unwrap(), "[DONE]");
        let chunks: Vec<Value> = payloads[..payloads.len() - 1]
            .iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        let joined: String = chunks
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&joined).unwrap(),
            reply.tool_calls()[0].arguments
        );
        let first = chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap();
        assert!(serde_json::from_str::<Value>(first).is_err());
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "tool_calls"
        );
    }

    #[test]
    fn a_text_streams_as_content_and_stops() {
        let payloads = stream_payloads(&Reply::text("done here"), "m", "r2");
        let text: String = payloads[..payloads.len() - 1]
            .iter()
            .map(|p| serde_json::from_str::<Value>(p).unwrap())
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(text, "done here");
        let last: Value = serde_json::from_str(&payloads[payloads.len() - 2]).unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
    }
}
