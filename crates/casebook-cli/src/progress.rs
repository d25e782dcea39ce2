//! Progress on stderr for long work, shown only on a terminal: a bar over a file's bytes, or a
//! spinner with a message.

use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::settings::Global;

#[derive(Clone)]
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over the bytes of `path`, or nothing when not on a terminal or reading stdin.
    pub fn for_file(settings: &Global, path: Option<&Path>) -> Self {
        let Some(len) = path.filter(|_| settings.progress).and_then(|p| fs_err::metadata(p).ok()).map(|m| m.len())
        else {
            return Self(None);
        };
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(5));
        let style =
            ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bar:30} {binary_bytes_per_sec} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Self(Some(bar))
    }

    /// A bar over `total` of something (`unit`: bytes sent, cases fetched), or nothing when
    /// not on a terminal.
    pub fn counting(settings: &Global, total: u64, bytes: bool, message: &str) -> Self {
        if !settings.progress {
            return Self(None);
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(5));
        let template = if bytes {
            "{spinner} {msg} {bytes}/{total_bytes} {bar:30} {binary_bytes_per_sec} eta {eta}"
        } else {
            "{spinner} {msg} {pos}/{len} {bar:30} {per_sec} eta {eta}"
        };
        bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        bar.set_message(message.to_owned());
        Self(Some(bar))
    }

    pub fn add(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// A spinner with a message, or nothing when not on a terminal.
    pub fn spinner(settings: &Global) -> Self {
        if !settings.progress {
            return Self(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(5));
        let style = ProgressStyle::with_template("{spinner} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Self(Some(bar))
    }

    pub fn message(&self, text: String) {
        if let Some(bar) = &self.0 {
            bar.set_message(text);
        }
    }

    pub fn set(&self, bytes: u64, cases: u64) {
        if let Some(bar) = &self.0 {
            if bytes > 0 {
                bar.set_position(bytes);
            }
            bar.set_message(crate::plural(cases, "case"));
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
