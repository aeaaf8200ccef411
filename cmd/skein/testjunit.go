package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/skein-dev/skein/vm"
)

// JUnit XML (--junit), the format CI systems read: one <testsuite> per
// test file, one <testcase> per test (a file that could not be loaded is
// one erroring test case named "(file)"). Failed assertions are a
// <failure>, an error a <error>, a skip <skipped>; printed output is
// <system-out>. The document is valid against the Jenkins xUnit plugin's
// junit-10.xsd (testdata/junit-10.xsd), which has no skipped count on
// <testsuites>: only each <testsuite> counts its skips.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes results as JUnit XML.
func writeJUnit(w io.Writer, results []vm.TestResult) error {
	root := junitSuites{Name: "skein test"}
	var total time.Duration
	index := map[string]int{} // file -> suite
	durations := map[string]time.Duration{}
	for _, res := range results {
		i, ok := index[res.File]
		if !ok {
			i = len(root.Suites)
			index[res.File] = i
			root.Suites = append(root.Suites, junitSuite{Name: res.File})
		}
		s := &root.Suites[i]
		c := junitCase{Name: res.Name, Classname: res.File, Time: seconds(res.Duration), SystemOut: res.Output}
		if c.Name == "" {
			c.Name = "(file)"
		}
		switch res.Status {
		case vm.TestFail:
			lines := make([]string, len(res.Failures))
			for j, f := range res.Failures {
				lines[j] = f.String()
			}
			msg := fmt.Sprintf("%d assertions failed", len(res.Failures))
			if len(res.Failures) == 1 {
				msg = res.Failures[0].String()
			}
			c.Failure = &junitProblem{Message: msg, Type: "assertion", Text: strings.Join(lines, "\n")}
			s.Failures++
		case vm.TestError:
			c.Error = &junitProblem{Message: lastLine(res.Error), Type: "error", Text: res.Error}
			s.Errors++
		case vm.TestSkip:
			c.Skipped = &junitProblem{Message: res.SkipReason}
			s.Skipped++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
		durations[res.File] += res.Duration
		total += res.Duration
	}
	for i := range root.Suites {
		s := &root.Suites[i]
		s.Time = seconds(durations[s.Name])
		root.Tests += s.Tests
		root.Failures += s.Failures
		root.Errors += s.Errors
	}
	root.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// lastLine is the last line of a traceback: the error message.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}
