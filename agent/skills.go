package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skein-dev/skein/internal/yamlfile"
)

// Skill tools and events.
const (
	// ToolLoadSkill is the built-in tool of an agent with skills: it
	// returns a skill's body (progressive disclosure).
	ToolLoadSkill = "load_skill"
	// ToolSpawnSubagent is the built-in tool of an agent with
	// specialists: it runs one as a child session.
	ToolSpawnSubagent = "spawn_subagent"
	// EventSkillLoaded records a load_skill call: {name}.
	EventSkillLoaded = "skill_loaded"
)

// SkillFile is the file that holds a skill: front matter (name,
// description) then its body (the Agent Skills layout).
const SkillFile = "SKILL.md"

// Skill is one skill an agent may load.
type Skill struct {
	Name        string
	Description string
	Body        string
}

func (s Skill) snapshot() map[string]any {
	return map[string]any{"name": s.Name, "description": s.Description, "body": s.Body}
}

// decodeSkills reads skills: folders (relative to Dir) holding SKILL.md
// files, at their top or one level down, or resolved skills ({name,
// description, body}: a snapshot's).
func (d *Definition) decodeSkills(x any) error {
	if x == nil {
		return nil
	}
	items, ok := x.([]any)
	if !ok {
		return &KeyError{Key: "skills", Err: fmt.Errorf("'skills': got %s, want a list of skill folders", TypeOf(x))}
	}
	seen := map[string]bool{}
	add := func(s Skill) error {
		if seen[s.Name] {
			return &KeyError{Key: "skills", Err: fmt.Errorf("skills: two skills are named '%s'", s.Name)}
		}
		seen[s.Name] = true
		d.Skills = append(d.Skills, s)
		return nil
	}
	for i, item := range items {
		switch item := item.(type) {
		case string:
			dir := item
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(d.Dir, dir)
			}
			found, err := skillsIn(dir)
			if err != nil {
				return &KeyError{Key: "skills", Err: fmt.Errorf("skills[%d]: %w", i, err)}
			}
			for _, s := range found {
				if err := add(s); err != nil {
					return err
				}
			}
		case map[string]any:
			s := Skill{}
			s.Name, _ = item["name"].(string)
			s.Description, _ = item["description"].(string)
			s.Body, _ = item["body"].(string)
			if s.Name == "" || len(item) != 3 {
				return &KeyError{Key: "skills", Err: fmt.Errorf("skills[%d]: a resolved skill is {name, description, body}", i)}
			}
			if err := add(s); err != nil {
				return err
			}
		default:
			return &KeyError{Key: "skills", Err: fmt.Errorf("skills[%d]: got %s, want a folder", i, TypeOf(item))}
		}
	}
	return nil
}

// skillsIn reads the skills of a folder: its own SKILL.md, else the
// SKILL.md of each subfolder, sorted by name.
func skillsIn(dir string) ([]Skill, error) {
	if _, err := os.Stat(filepath.Join(dir, SkillFile)); err == nil {
		s, err := ReadSkill(filepath.Join(dir, SkillFile))
		if err != nil {
			return nil, err
		}
		return []Skill{s}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("no skill folder %s", dir)
	}
	var out []Skill
	for _, e := range entries {
		path := filepath.Join(dir, e.Name(), SkillFile)
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			continue
		}
		s, err := ReadSkill(path)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no %s (directly or one folder down)", dir, SkillFile)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ReadSkill reads a SKILL.md: "---", YAML front matter with name and
// description, "---", then the body.
func ReadSkill(path string) (Skill, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Skill{}, err
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	front, body, closed := strings.Cut(rest, "\n---\n")
	if !ok || !closed {
		return Skill{}, fmt.Errorf("%s: no front matter (a '---' line, name and description, a '---' line)", path)
	}
	v, err := yamlfile.Parse([]byte(front))
	if err != nil {
		return Skill{}, fmt.Errorf("%s: front matter: %w", path, err)
	}
	m, _ := v.(map[string]any)
	s := Skill{Body: strings.TrimLeft(body, "\n")}
	s.Name, _ = m["name"].(string)
	s.Description, _ = m["description"].(string)
	if s.Name == "" || s.Description == "" {
		return Skill{}, fmt.Errorf("%s: front matter needs name and description", path)
	}
	return s, nil
}

// Skill returns the skill named name, or false.
func (d *Definition) Skill(name string) (Skill, bool) {
	for _, s := range d.Skills {
		if s.Name == name {
			return s, true
		}
	}
	return Skill{}, false
}
