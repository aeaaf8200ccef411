// Package export writes a session in the formats that leave skein and
// reads them back for an import: the JSON and JSONL exports, the forensic
// log (whole, or written as the session runs by ForensicLog), and a
// runnable pipeline with its recorded replies (ExportStar). The CLI's
// sessions export/import and run --forensic-log use it; the agent loop
// and the builtins never do.
package export
