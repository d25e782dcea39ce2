//! Where request bodies are kept while they are read (an import, a capture, a console upload),
//! and the names they are kept under.

use crate::error::ApiError;

/// The most bytes a file name may have on the file systems the server writes to.
const NAME_MAX: usize = 255;

/// The name an uploaded file is kept and shown under: the last part of the client's `filename`
/// (`default` without one). A name no file system takes (a control character such as NUL,
/// more than 255 bytes) is refused, naming the `parameter` that sent it.
pub(crate) fn upload_name(parameter: &str, filename: Option<&str>, default: &str) -> Result<String, ApiError> {
    let Some(given) = filename else { return Ok(default.to_owned()) };
    let last = given.rsplit(['/', '\\']).next().unwrap_or_default();
    if let Some(c) = last.chars().find(|c| c.is_control()) {
        return Err(ApiError::bad_request(format!(
            "`{parameter}` holds the control character U+{:04X}: name the file without it",
            u32::from(c)
        )));
    }
    if last.len() > NAME_MAX {
        return Err(ApiError::bad_request(format!(
            "`{parameter}` is {} bytes long: a file name has at most {NAME_MAX}",
            last.len()
        )));
    }
    Ok(match last {
        "" | "." | ".." => default.to_owned(),
        name => name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_last_part_and_refuse_what_no_file_system_takes() {
        assert_eq!(upload_name("filename", Some("a/b/cases.jsonl"), "body.jsonl").unwrap(), "cases.jsonl");
        assert_eq!(upload_name("filename", Some("..\\x.csv"), "body.jsonl").unwrap(), "x.csv");
        assert_eq!(upload_name("filename", Some("ünï.yaml"), "body.jsonl").unwrap(), "ünï.yaml");
        assert_eq!(upload_name("filename", Some(".."), "body.jsonl").unwrap(), "body.jsonl");
        assert_eq!(upload_name("filename", None, "body.jsonl").unwrap(), "body.jsonl");
        let err = upload_name("filename", Some("a\0.jsonl"), "body.jsonl").unwrap_err();
        assert_eq!(err.body.message, "`filename` holds the control character U+0000: name the file without it");
        let long = format!("{}.jsonl", "é".repeat(130));
        let err = upload_name("filename", Some(&long), "body.jsonl").unwrap_err();
        assert_eq!(err.body.message, "`filename` is 266 bytes long: a file name has at most 255");
    }
}
