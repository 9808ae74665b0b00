// render.cjs renders chat templates with the reference engine
// @huggingface/jinja for the parity test (parity_test.go).
// Input on stdin: {"template": "...", "cases": [{variables}, ...]}.
// Output on stdout: [{"out": "..."} | {"err": "..."}, ...], in order.
const path = require("path");
const dir = process.env.OMAR_NPM_FIXTURES;
const { Template } = require(path.join(dir, "@huggingface", "jinja"));
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const tmpl = new Template(req.template);
  const res = req.cases.map((vars) => {
    try {
      return { out: tmpl.render(vars) };
    } catch (e) {
      return { err: String(e && e.message ? e.message : e) };
    }
  });
  process.stdout.write(JSON.stringify(res));
});
