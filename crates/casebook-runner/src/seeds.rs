//! Seed files (mas-lab §3): a YAML or JSON file holding a bare list of seeds, or a mapping with
//! the list under `seeds`, `items`, `memory_seeds` or `entries`. Paths in a dataset are relative to the
//! dataset file; in an experiment, to the experiment file.

use std::path::Path;

use casebook_formats::pointer::Ptr;
use casebook_model::{Case, MemorySeeds, Seed};

/// The seeds of the file at `path` (see [`MemorySeeds::seeds`] for the shapes it may have).
pub fn load_seed_file(path: &Path) -> Result<Vec<Seed>, String> {
    let text = fs_err::read_to_string(path).map_err(|e| e.to_string())?;
    let node = casebook_formats::yaml::parse(&text).map_err(|e| format!("`{}`: {}", path.display(), e.message))?;
    let content =
        node.to_value(&Ptr::ROOT).map_err(|_| format!("`{}` holds a number JSON cannot represent", path.display()))?;
    MemorySeeds::File { file: path.display().to_string(), content }.seeds()
}

/// Reads the seed file a case names (relative to `base`, the dataset's folder) into the case.
pub fn inline_case_seeds(case: &mut Case, base: Option<&Path>) -> Result<(), String> {
    if let Some(MemorySeeds::Path(file)) = &case.task.memory_seeds {
        let Some(base) = base else {
            return Err(format!(
                "case `{}` names the seed file `{file}`, which cannot be found from a stored dataset; \
                 put the seeds in the case",
                case.id
            ));
        };
        let seeds = load_seed_file(&base.join(file)).map_err(|e| format!("case `{}`: {e}", case.id))?;
        case.task.memory_seeds = Some(MemorySeeds::Inline(seeds));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_and_wrapped_lists() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("bare.yaml");
        fs_err::write(&bare, "- {source: a, content: x}\n- {source: b, content: y, target_agent: planner}\n").unwrap();
        let wrapped = dir.path().join("wrapped.json");
        fs_err::write(&wrapped, r#"{"items": [{"source": "a", "content": "x"}]}"#).unwrap();
        assert_eq!(load_seed_file(&bare).unwrap()[1].target_agent.as_deref(), Some("planner"));
        assert_eq!(load_seed_file(&wrapped).unwrap().len(), 1);
        let bad = dir.path().join("bad.yaml");
        fs_err::write(&bad, "other: 1\n").unwrap();
        assert!(load_seed_file(&bad).unwrap_err().contains("neither a list nor a mapping"));
    }
}
