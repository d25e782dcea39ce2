//! Bulk import of a file in any format, and export of a version in any format, both streamed.
