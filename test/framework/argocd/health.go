// Package argocd runs Argo CD resource customizations the way Argo CD does:
// health checks in gopher-lua, the interpreter Argo CD embeds, with the
// libraries Argo CD opens for a check configured in argocd-cm.
package argocd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The health statuses Argo CD accepts from a health check.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Suspended   = "Suspended"
	Degraded    = "Degraded"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Status is what a health check returns.
type Status struct {
	Status, Message string
}

// HealthScript returns config/argocd/health.lua, the file the snippets are
// rendered from.
func HealthScript() (string, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "config", "argocd", "health.lua"))
	return string(b), err
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Health runs a health check on obj as Argo CD runs one from argocd-cm
// (util/lua: standard libraries skipped, then package, base and table
// opened; obj as the global "obj"; a one-second limit) and returns its
// result. A status Argo CD would not accept is an error.
func Health(script string, obj *unstructured.Unstructured) (Status, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), NRet: 0, Protect: true}, lua.LString(name)); err != nil {
			return Status{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decode(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return Status{}, err
	}
	t, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Status{}, fmt.Errorf("expect table output from Lua script, not %s", l.Get(-1).Type())
	}
	s := Status{Status: lua.LVAsString(t.RawGetString("status")), Message: lua.LVAsString(t.RawGetString("message"))}
	switch s.Status {
	case Healthy, Progressing, Suspended, Degraded, Missing, Unknown:
		return s, nil
	}
	return s, fmt.Errorf("Lua returned an invalid health status %q", s.Status)
}

// decode turns a JSON-decoded object into Lua values as Argo CD does.
func decode(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decode(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for k, item := range v {
			tbl.RawSetH(lua.LString(k), decode(l, item))
		}
		return tbl
	}
	return lua.LNil
}
