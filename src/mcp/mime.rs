//! The media type of an exported file, from its name (D-18.2): what MCP clients show and how
//! `resources/read` carries the bytes (text or base64 blob).

/// The media type of a file named `name`, from its extension (ASCII case-insensitive);
/// `application/octet-stream` when unknown.
pub(crate) fn of(name: &str) -> &'static str {
    let base = name.rsplit('/').next().unwrap_or(name);
    let Some((stem, extension)) = base.rsplit_once('.') else {
        return OCTET_STREAM;
    };
    if stem.is_empty() {
        return OCTET_STREAM;
    }
    let extension = extension.to_ascii_lowercase();
    match extension.as_str() {
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/jsonl",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        "sh" => "application/x-sh",
        "c" | "h" => "text/x-c",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => OCTET_STREAM,
    }
}

const OCTET_STREAM: &str = "application/octet-stream";

/// Whether `mime` is text a client reads as such: `text/*` and the structured text types.
/// `resources/read` sends such a file as `text` when its bytes are UTF-8, else as a blob.
pub(crate) fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
        || matches!(
            mime,
            "application/json"
                | "application/jsonl"
                | "application/xml"
                | "application/yaml"
                | "application/toml"
                | "application/x-sh"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_last_extension_and_unknown_is_octet_stream() {
        assert_eq!(of("report.md"), "text/markdown");
        assert_eq!(of("dir.v2/DATA.JSON"), "application/json");
        assert_eq!(of("archive.tar.gz"), "application/gzip");
        assert_eq!(of("image.png"), "image/png");
        assert_eq!(of(".bashrc"), OCTET_STREAM);
        assert_eq!(of("Makefile"), OCTET_STREAM);
        assert_eq!(of("dir.d/file"), OCTET_STREAM);
        assert_eq!(of("x.unknownext"), OCTET_STREAM);
        assert!(is_text("text/markdown") && is_text("image/svg+xml"));
        assert!(!is_text("image/png") && !is_text(OCTET_STREAM));
    }
}
