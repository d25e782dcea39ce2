//! A real headless Chromium for the console's tests, driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`, which `scripts/test.sh` installs). The few WebDriver
//! commands the tests need are JSON over loopback HTTP, sent with the client the other tests use.
//!
//! With `CASEBOOK_SHOTS=DIR`, [`Browser::shot`] saves screenshots there to look at.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a test waits for what it expects to appear.
const WAIT: Duration = Duration::from_secs(10);

pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

#[derive(Clone)]
pub struct Element(String);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Browser {
    pub async fn start() -> Self {
        let driver_path = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "chromedriver is missing: run the tests with `scripts/test.sh`, which installs `chromium-driver`"
                )
            });
        let port = free_port();
        let mut command = Command::new(driver_path);
        command.arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null());
        // Its own process group, so that dropping the browser ends Chromium too.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let driver = command.spawn().expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        // A command that hangs fails the test instead of holding it forever.
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        let started = Instant::now();
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(started.elapsed() < WAIT, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--window-size=1400,1000".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        }}});
        let mut browser = Browser { http, session: String::new(), driver, _profile: profile };
        let answer = browser.send("POST", &format!("{base}/session"), Some(capabilities)).await;
        let id = answer["sessionId"].as_str().unwrap_or_else(|| panic!("no WebDriver session: {answer}"));
        browser.session = format!("{base}/session/{id}");
        browser
    }

    async fn send(&self, method: &str, url: &str, body: Option<Value>) -> Value {
        match self.try_send(method, url, body).await {
            Ok(value) => value,
            Err(error) => panic!("WebDriver {method} {url}: {error}"),
        }
    }

    /// A WebDriver command's value, or its error (`stale element reference: …`).
    async fn try_send(&self, method: &str, url: &str, body: Option<Value>) -> Result<Value, String> {
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(format!("{status} {}: {}", answer["value"]["error"], answer["value"]["message"]));
        }
        Ok(answer["value"].clone())
    }

    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.send(method, &format!("{}{path}", self.session), body).await
    }

    /// Does `what` to the element `css` selects, finding it again while the page is still
    /// being replaced (a navigation leaves elements of the page before it stale).
    async fn on_element(&self, css: &str, what: &str, body: Option<Value>) -> Value {
        let started = Instant::now();
        loop {
            let element = self.find(css).await;
            let method = if what == "text" { "GET" } else { "POST" };
            let url = format!("{}/element/{}/{what}", self.session, element.0);
            match self.try_send(method, &url, body.clone()).await {
                Ok(value) => return value,
                Err(error) if error.contains("stale element") && started.elapsed() < WAIT => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("WebDriver {what} on `{css}`: {error}"),
            }
        }
    }

    /// Sends a Chrome DevTools command (`Emulation.…`) through chromedriver.
    pub async fn devtools(&self, command: &str, params: Value) {
        self.command("POST", "/goog/cdp/execute", Some(json!({"cmd": command, "params": params}))).await;
    }

    /// Shows pages as a phone or tablet of this width in CSS pixels would.
    pub async fn set_width(&self, width: u32) {
        let metrics = json!({"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": true});
        self.devtools("Emulation.setDeviceMetricsOverride", metrics).await;
    }

    pub async fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url}))).await;
    }

    pub async fn url(&self) -> String {
        self.command("GET", "/url", None).await.as_str().unwrap_or_default().to_owned()
    }

    /// Runs `script` in the page (`return …`) and gives back what it returns.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.command("POST", "/execute/sync", Some(json!({"script": script, "args": args}))).await
    }

    /// The page's text as a person reads it.
    pub async fn text(&self) -> String {
        self.run("return document.body.innerText", json!([])).await.as_str().unwrap_or_default().to_owned()
    }

    /// The elements `css` selects now.
    pub async fn all(&self, css: &str) -> Vec<Element> {
        let found = self.command("POST", "/elements", Some(json!({"using": "css selector", "value": css}))).await;
        found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e[ELEMENT].as_str())
            .map(|id| Element(id.to_owned()))
            .collect()
    }

    /// The first element `css` selects, waited for.
    pub async fn find(&self, css: &str) -> Element {
        let started = Instant::now();
        loop {
            if let Some(found) = self.all(css).await.into_iter().next() {
                return found;
            }
            assert!(started.elapsed() < WAIT, "no `{css}` on {}:\n{}", self.url().await, self.text().await);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the page's text holds `expected`.
    pub async fn wait_for_text(&self, expected: &str) -> String {
        let started = Instant::now();
        loop {
            let text = self.text().await;
            if text.contains(expected) {
                return text;
            }
            assert!(started.elapsed() < WAIT, "`{expected}` never appeared on {}:\n{text}", self.url().await);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn text_of(&self, css: &str) -> String {
        self.on_element(css, "text", None).await.as_str().unwrap_or_default().to_owned()
    }

    pub async fn click(&self, css: &str) {
        self.on_element(css, "click", None).await;
    }

    /// Clicks what sends a form and waits for the page that answers.
    pub async fn submit(&self, css: &str) {
        self.mark_page().await;
        self.click(css).await;
        self.wait_for_new_page().await;
    }

    /// Marks the page shown now, so that [`Browser::wait_for_new_page`] can tell it went.
    async fn mark_page(&self) {
        self.run("window.casebookOldPage = true", json!([])).await;
    }

    async fn wait_for_new_page(&self) {
        let started = Instant::now();
        loop {
            let state = self.run("return window.casebookOldPage ? 'old' : document.readyState", json!([])).await;
            if state == "complete" {
                return;
            }
            assert!(started.elapsed() < WAIT, "no new page came after {}", self.url().await);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Follows the link whose text is `text` and waits for its page.
    pub async fn click_link(&self, text: &str) {
        self.mark_page().await;
        let xpath = format!("//a[normalize-space(.)={}]", serde_json::to_string(text).unwrap().replace('"', "'"));
        let started = Instant::now();
        let element = loop {
            let found = self.command("POST", "/elements", Some(json!({"using": "xpath", "value": xpath}))).await;
            if let Some(id) = found.as_array().and_then(|a| a.first()).and_then(|e| e[ELEMENT].as_str()) {
                break Element(id.to_owned());
            }
            assert!(started.elapsed() < WAIT, "no link `{text}` on {}:\n{}", self.url().await, self.text().await);
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        self.command("POST", &format!("/element/{}/click", element.0), None).await;
        self.wait_for_new_page().await;
    }

    /// Replaces what a field holds with `text`.
    pub async fn fill(&self, css: &str, text: &str) {
        self.on_element(css, "clear", None).await;
        self.on_element(css, "value", Some(json!({"text": text}))).await;
    }

    /// Types `keys` as a person does on the page (not into a field): each a key down and up.
    pub async fn press(&self, keys: &str) {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|c| {
                [json!({"type": "keyDown", "value": c.to_string()}), json!({"type": "keyUp", "value": c.to_string()})]
            })
            .collect();
        let body = json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]});
        self.command("POST", "/actions", Some(body)).await;
    }

    /// Presses `key`, which sends a form, and waits for the page that answers.
    pub async fn press_to_submit(&self, key: &str) {
        self.mark_page().await;
        self.press(key).await;
        self.wait_for_new_page().await;
    }

    /// Saves a screenshot as `NAME.png` in `$CASEBOOK_SHOTS`, when it is set.
    pub async fn shot(&self, name: &str) {
        let Ok(dir) = std::env::var("CASEBOOK_SHOTS") else { return };
        let png = self.command("GET", "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap_or_default()).unwrap();
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(std::path::Path::new(&dir).join(format!("{name}.png")), bytes).unwrap();
    }

    /// Ends the session (and with it Chromium) and the driver.
    pub async fn quit(mut self) {
        self.command("DELETE", "", None).await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    /// A test that failed half-way still ends Chromium: the driver's whole process group.
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.driver.id())]).status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
