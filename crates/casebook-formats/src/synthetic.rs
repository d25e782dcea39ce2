//! Deterministic synthetic datasets for benchmarks (`casebook generate`, the criterion
//! benches): the same bytes on every machine, with the non-ASCII text and nested objects that
//! real datasets have.

use serde_json::{Value, json};

/// A small deterministic generator (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next_u64() % items.len() as u64) as usize]
    }

    /// `words` words of the generator's vocabulary.
    pub fn sentence(&mut self, words: usize) -> String {
        (0..words).map(|_| self.pick(WORDS)).collect::<Vec<_>>().join(" ")
    }

    pub fn tag(&mut self) -> &'static str {
        self.pick(TAGS)
    }
}

const WORDS: &[&str] = &[
    "agent",
    "invoice",
    "refund",
    "latency",
    "cluster",
    "memory",
    "customer",
    "policy",
    "budget",
    "schedule",
    "Celestia",
    "Verdantia",
    "train",
    "ticket",
    "database",
    "timeout",
    "résumé",
    "naïve",
    "café",
    "→",
];
const TAGS: &[&str] = &["math", "memory", "recall", "tool_usage", "search", "reasoning", "multi_step", "easy", "hard"];

/// Sample `i` of a letta dataset: about 600 bytes as JSON.
pub fn letta_row(rng: &mut Rng, i: u64) -> Value {
    json!({
        "id": i,
        "input": format!("Question {i}: {}?", rng.sentence(24)),
        "ground_truth": rng.sentence(14),
        "tags": [rng.tag(), rng.tag()],
        "metadata": {"difficulty": rng.pick(&["easy", "medium", "hard"]), "source": "generator", "batch": i / 1000},
        "agent_args": {"temperature": 0.2, "persona": rng.sentence(6)},
        "rubric_vars": {"reference": rng.sentence(8)}
    })
}

/// Vocabularies of the realistic rows, one per language. Most rows are not plain ASCII, as in
/// datasets collected from users: accents, CJK, right-to-left scripts, emoji.
const LANGUAGES: &[&[&str]] = &[
    &["please", "summarise", "the", "invoice", "refund", "for", "order", "customer", "my", "account", "why", "is"],
    &["résumé", "café", "naïve", "déjà", "commande", "remboursement", "facture", "s'il", "vous", "plaît", "où", "est"],
    &["Größe", "Rückerstattung", "Bestellung", "bitte", "über", "Straße", "für", "können", "Sie", "mir", "Konto"],
    &["pedido", "reembolso", "año", "señor", "dirección", "cuánto", "está", "mañana", "factura", "por", "favor"],
    &["请", "帮我", "总结", "这个", "订单", "退款", "发票", "客户", "账户", "为什么", "没有", "收到"],
    &["注文", "返金", "請求書", "お客様", "アカウント", "確認", "してください", "ありがとう", "まだ", "届いて"],
    &["주문", "환불", "영수증", "고객", "계정", "확인해", "주세요", "감사합니다", "아직", "도착"],
    &["طلب", "استرداد", "فاتورة", "العميل", "حساب", "لماذا", "لم", "يصل", "من", "فضلك"],
    &["הזמנה", "החזר", "חשבונית", "לקוח", "חשבון", "למה", "לא", "הגיע", "בבקשה", "תודה"],
    &["заказ", "возврат", "счёт", "клиент", "аккаунт", "почему", "не", "пришёл", "пожалуйста", "спасибо"],
];
const EMOJI: &[&str] = &["🙂", "🚀", "✅", "❌", "🔥", "👍", "🤖", "📦", "🧾", "💳"];
/// Short prompts users send again and again, often with nothing else on the row.
const CANNED: &[&str] = &[
    "hi",
    "hello",
    "Hello!",
    "test",
    "What can you do?",
    "thanks 🙏",
    "¿Hola?",
    "你好",
    "こんにちは",
    "مرحبا",
    "Bonjour, ça va ?",
    "ping",
];

impl Rng {
    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// `words` words of one language, with now and then an emoji, a quoted phrase, a path with
    /// backslashes or a line break: what makes JSON strings carry escapes.
    fn text(&mut self, language: &[&str], words: usize) -> String {
        // Chinese and Japanese put no spaces between words.
        let cjk =
            language.first().and_then(|w| w.chars().next()).is_some_and(|c| ('\u{3000}'..'\u{AC00}').contains(&c));
        let mut out = String::new();
        for k in 0..words {
            if k > 0 && !cjk {
                out.push(' ');
            }
            match self.below(40) {
                0 => out.push_str(self.pick(EMOJI)),
                1 => {
                    out.push('"');
                    out.push_str(self.pick(language));
                    out.push('"');
                }
                2 => out.push_str("C:\\Users\\data\\report.csv"),
                3 => out.push('\n'),
                _ => out.push_str(self.pick(language)),
            }
        }
        out
    }
}

/// The `k`th of the popular prompts (the same text each time it is asked for).
fn popular_prompt(k: u64) -> String {
    let mut rng = Rng(k.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
    let language = LANGUAGES[(k % LANGUAGES.len() as u64) as usize];
    let words = 8 + rng.below(30) as usize;
    rng.text(language, words)
}

/// Row `i` of a realistic letta JSONL file, as written by the tools that make such files:
/// about 30 % of rows without an id, prompts that repeat (some rows exactly, so that their
/// derived ids collide), most rows not ASCII, a fifth of rows written with every non-ASCII
/// character escaped (`\u00e9`, surrogate pairs for emoji) as Python's `json.dumps` does,
/// multi-line strings, and shapes that vary from row to row. About 490 bytes a row on average.
pub fn letta_realistic_row(rng: &mut Rng, i: u64, out: &mut Vec<u8>) {
    let start = out.len();
    // Exact repeats of a short row: `{"input": "hi"}` and the like.
    if rng.chance(4) {
        let text = rng.pick(CANNED);
        let _ = serde_json::to_writer(&mut *out, &json!({ "input": text }));
        out.push(b'\n');
        return;
    }
    let language = LANGUAGES[if rng.chance(30) { 0 } else { rng.below(LANGUAGES.len() as u64) as usize }];
    let mut row = serde_json::Map::new();
    if !rng.chance(29) {
        row.insert(
            "id".into(),
            match rng.below(3) {
                0 => json!(i),
                1 => json!(format!("case-{i:07}")),
                _ => json!(format!("{:08x}-{:04x}-{:04x}", rng.next_u64() as u32, i & 0xffff, rng.below(1 << 16))),
            },
        );
    }
    // A third of prompts come from a pool of popular ones, the most popular most often.
    let prompt = if rng.chance(33) {
        let r = rng.below(1 << 20) as f64 / f64::from(1 << 20);
        popular_prompt((r * r * r * 5_000.0) as u64)
    } else {
        let words = 8 + rng.below(44) as usize;
        rng.text(language, words)
    };
    let list = rng.chance(8);
    if list {
        let turns = 2 + rng.below(2) as usize;
        let mut messages = vec![json!(prompt)];
        for _ in 1..turns {
            let words = 4 + rng.below(12) as usize;
            messages.push(json!(rng.text(language, words)));
        }
        row.insert("input".into(), json!(messages));
        if rng.chance(50) {
            let answers: Vec<Value> = (0..turns).map(|_| json!(rng.sentence(2))).collect();
            row.insert("ground_truth".into(), json!(answers));
        }
    } else {
        row.insert("input".into(), json!(prompt));
        if rng.chance(85) {
            let words = 3 + rng.below(34) as usize;
            row.insert("ground_truth".into(), json!(rng.text(language, words)));
        }
    }
    if rng.chance(45) {
        row.insert("tags".into(), json!([rng.tag(), rng.tag()]));
    }
    if rng.chance(30) {
        row.insert(
            "metadata".into(),
            json!({"difficulty": rng.pick(&["easy", "medium", "hard"]), "source": rng.pick(&["support", "chat", "forum"]), "batch": i / 1000}),
        );
    }
    if rng.chance(15) {
        row.insert("agent_args".into(), json!({"temperature": 0.2, "persona": rng.text(language, 6)}));
    }
    if rng.chance(10) {
        row.insert("rubric_vars".into(), json!({"reference": rng.text(language, 10)}));
    }
    if rng.chance(4) {
        row.insert("extra_vars".into(), json!({"file_path": format!("sandbox/task_{i}.py")}));
    }
    let _ = serde_json::to_writer(&mut *out, &Value::Object(row));
    if rng.chance(20) {
        escape_non_ascii(out, start);
    }
    out.push(b'\n');
}

/// Rewrites `out[start..]` (JSON text) with every non-ASCII character as a `\u` escape, UTF-16
/// surrogate pairs beyond the BMP, as `json.dumps` does by default. Outside strings JSON text
/// is ASCII, so escaping every such character keeps the value.
fn escape_non_ascii(out: &mut Vec<u8>, start: usize) {
    let Ok(text) = std::str::from_utf8(&out[start..]) else { return };
    let mut escaped = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if c.is_ascii() {
            escaped.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                escaped.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.truncate(start);
    out.extend_from_slice(escaped.as_bytes());
}

/// The spans of agent invocation `i` as OTLP JSON, in one of the conventions `casebook capture`
/// reads: GenAI with an agent span, a model call asking for a tool, the tool and the final call
/// (most); the flattened deprecated form without an agent span; OpenInference; a conversation
/// with its history in the input; invocations of one conversation sending only the new message;
/// and, one in twenty, an invocation whose content was not
/// recorded. Prompts repeat (a fifth of them are drawn from a small set), and text is non-ASCII.
pub fn otlp_invocation(rng: &mut Rng, i: u64) -> Vec<Value> {
    let trace = format!("{:016x}{:016x}", rng.next_u64(), i);
    let id = |n: u64| format!("{:012x}{n:04x}", i);
    let time = 1_714_000_000_000_000_000u64 + i * 1_000_000_000;
    let attr = |k: &str, v: String| json!({"key": k, "value": {"stringValue": v}});
    let span = |n: u64, parent: Option<u64>, name: &str, attributes: Vec<Value>| {
        json!({"traceId": trace, "spanId": id(n), "parentSpanId": parent.map(id).unwrap_or_default(), "name": name,
            "kind": 1, "startTimeUnixNano": (time + n * 1000).to_string(), "endTimeUnixNano": (time + 900_000_000 - n).to_string(),
            "attributes": attributes, "status": {}})
    };
    let question = if rng.next_u64().is_multiple_of(5) {
        format!("What is the refund policy for {}?", rng.pick(&["Celestia", "Verdantia", "café orders"]))
    } else {
        format!("Ticket {i}: {} — {}?", rng.sentence(14), rng.sentence(6))
    };
    let answer = format!("{} ({})", rng.sentence(18), rng.pick(&["résumé", "naïve", "→ done"]));
    let tool = rng.pick(&["search_orders", "get_invoice", "check_latency"]);
    let args = json!({"query": rng.sentence(3), "limit": rng.next_u64() % 10}).to_string();
    let text = |role: &str, t: &str| json!({"role": role, "parts": [{"type": "text", "content": t}]});
    let system = "You are the support agent of a shop. Answer briefly and cite the policy.";
    match rng.next_u64() % 20 {
        0 => vec![
            span(0, None, "invoke_agent Support", vec![attr("gen_ai.operation.name", "invoke_agent".into())]),
            span(1, Some(0), "chat gpt-4o", vec![attr("gen_ai.operation.name", "chat".into())]),
        ],
        1..=3 => vec![
            span(0, None, "POST /ask", vec![]),
            span(
                1,
                Some(0),
                "openai.chat",
                vec![
                    attr("gen_ai.prompt.0.role", "system".into()),
                    attr("gen_ai.prompt.0.content", system.into()),
                    attr("gen_ai.prompt.1.role", "user".into()),
                    attr("gen_ai.prompt.1.content", question),
                    attr("gen_ai.completion.0.role", "assistant".into()),
                    attr("gen_ai.completion.0.content", answer),
                ],
            ),
        ],
        4..=6 => vec![
            span(
                0,
                None,
                "Agent",
                vec![
                    attr("openinference.span.kind", "AGENT".into()),
                    attr("input.value", question.clone()),
                    attr("output.value", answer.clone()),
                    attr("session.id", format!("s-{}", i / 3)),
                ],
            ),
            span(
                1,
                Some(0),
                "retrieve",
                vec![
                    attr("openinference.span.kind", "RETRIEVER".into()),
                    attr("retrieval.documents.0.document.id", "policy.md".into()),
                    attr("retrieval.documents.0.document.content", rng.sentence(40)),
                ],
            ),
            span(
                2,
                Some(0),
                "ChatOpenAI",
                vec![
                    attr("openinference.span.kind", "LLM".into()),
                    attr("llm.input_messages.0.message.role", "system".into()),
                    attr("llm.input_messages.0.message.content", system.into()),
                    attr("llm.input_messages.1.message.role", "user".into()),
                    attr("llm.input_messages.1.message.content", question),
                    attr("llm.output_messages.0.message.role", "assistant".into()),
                    attr("llm.output_messages.0.message.content", answer),
                ],
            ),
        ],
        8 => {
            // A conversation of several invocations, each sending only the new message: capture
            // joins them (every third invocation starts one).
            vec![span(
                0,
                None,
                "invoke_agent Support",
                vec![
                    attr("gen_ai.operation.name", "invoke_agent".into()),
                    attr("gen_ai.conversation.id", format!("talk-{}", i / 3)),
                    attr("gen_ai.input.messages", json!([text("user", &question)]).to_string()),
                    attr("gen_ai.output.messages", json!([text("assistant", &answer)]).to_string()),
                ],
            )]
        }
        7 => {
            let history = json!([
                text("system", system),
                text("user", "Hello"),
                text("assistant", "Hi! How can I help?"),
                text("user", &question)
            ]);
            vec![span(
                0,
                None,
                "invoke_agent Support",
                vec![
                    attr("gen_ai.operation.name", "invoke_agent".into()),
                    attr("gen_ai.conversation.id", format!("c-{i}")),
                    attr("gen_ai.input.messages", history.to_string()),
                    attr("gen_ai.output.messages", json!([text("assistant", &answer)]).to_string()),
                ],
            )]
        }
        _ => {
            let user = json!([text("user", &question)]);
            let call = json!([{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": tool, "arguments": args}]}]);
            let tools = json!([{"type": "function", "name": tool, "description": rng.sentence(8), "parameters": {"type": "object"}}]);
            let final_answer = json!([text("assistant", &answer)]).to_string();
            vec![
                span(
                    0,
                    None,
                    "invoke_agent Support",
                    vec![
                        attr("gen_ai.operation.name", "invoke_agent".into()),
                        attr("gen_ai.agent.name", "Support".into()),
                        attr("gen_ai.system_instructions", json!([{"type": "text", "content": system}]).to_string()),
                        attr("gen_ai.tool.definitions", tools.to_string()),
                        attr("gen_ai.input.messages", user.to_string()),
                        attr("gen_ai.output.messages", final_answer.clone()),
                    ],
                ),
                span(
                    1,
                    Some(0),
                    "chat gpt-4o",
                    vec![
                        attr("gen_ai.operation.name", "chat".into()),
                        attr("gen_ai.input.messages", user.to_string()),
                        attr("gen_ai.output.messages", call.to_string()),
                    ],
                ),
                span(
                    2,
                    Some(0),
                    "execute_tool",
                    vec![
                        attr("gen_ai.operation.name", "execute_tool".into()),
                        attr("gen_ai.tool.name", tool.into()),
                        attr("gen_ai.tool.call.arguments", args),
                    ],
                ),
                span(
                    3,
                    Some(0),
                    "chat gpt-4o",
                    vec![
                        attr("gen_ai.operation.name", "chat".into()),
                        attr("gen_ai.input.messages", user.to_string()),
                        attr("gen_ai.output.messages", final_answer),
                    ],
                ),
            ]
        }
    }
}
