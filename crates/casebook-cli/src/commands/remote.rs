//! `casebook login`, `push` and `pull`: the VoltAgent flow against a casebook server.

use std::io::IsTerminal;

use anyhow::Context;
use serde_json::json;

use crate::Outcome;
use crate::args::LoginArgs;
use crate::remote::{Credentials, Remote, save_credentials};
use crate::settings::Global;

pub fn login(settings: &Global, args: LoginArgs) -> anyhow::Result<Outcome> {
    let Some(url) = args.url else {
        anyhow::bail!("name the server: `casebook login http://HOST:PORT` (or set `CASEBOOK_URL`)");
    };
    let token = if args.token_stdin {
        let mut text = String::new();
        std::io::stdin().read_line(&mut text).context("cannot read the key from standard input")?;
        text.trim().to_owned()
    } else if let Ok(token) = std::env::var("CASEBOOK_TOKEN") {
        token
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        dialoguer::Password::new().with_prompt(format!("API key for {url}")).interact().context("cannot read the key")?
    } else {
        anyhow::bail!("no API key: pass it on standard input with `--token-stdin`, or set `CASEBOOK_TOKEN`");
    };
    let runtime = crate::stores::runtime()?;
    let remote = runtime.block_on(Remote::with(url.clone(), token.clone()))?;
    let path = save_credentials(&Credentials { url: remote.url.clone(), token })?;
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"url": remote.url, "project": remote.project, "saved": path}))
    } else {
        format!("logged in to {} (project `{}`); the key is saved in {}\n", remote.url, remote.project, path.display())
    })?;
    Ok(Outcome::Ok)
}
