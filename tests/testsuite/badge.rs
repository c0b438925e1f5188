//! `--badge FILE.svg` and `--badge FILE.json` (shields.io's endpoint JSON) of real runs: the count is the JSON report's (MUST
//! scenarios executed without a MUST broken, over the MUST scenarios executed), the colour the
//! run's; the SVGs rendered in headless Chromium (as the HTML report's test does), the screenshot
//! decoded and its boxes, colours and text checked, and each text's width as the browser lays it
//! out compared with the width the badge gives it. The screenshot stays under the cargo target
//! dir (never committed).

use std::path::Path;

use serde_json::Value;

use crate::common::{Sandbox, code, text, wrong_rid_run};
use crate::html_report::{chromium_or_skip, render_sized};

/// How many times larger than its own size the page shows each badge.
const ZOOM: u32 = 4;

struct Shot {
    width: u32,
    height: u32,
    bytes_per_pixel: usize,
    data: Vec<u8>,
}

impl Shot {
    fn read(png: &Path) -> Shot {
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut data = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut data).unwrap();
        assert_eq!(info.bit_depth, png::BitDepth::Eight, "{info:?}");
        Shot { width: info.width, height: info.height, bytes_per_pixel: info.line_size / info.width as usize, data }
    }

    /// The RGB of the pixel at (`x`, `y`).
    fn rgb(&self, x: u32, y: u32) -> [u8; 3] {
        assert!(x < self.width && y < self.height, "({x}, {y}) outside {}x{}", self.width, self.height);
        let i = (y as usize * self.width as usize + x as usize) * self.bytes_per_pixel;
        [self.data[i], self.data[i + 1], self.data[i + 2]]
    }

    /// Pixels in a rectangle (badge coordinates times [`ZOOM`], from `top`) that are near white.
    fn whites(&self, top: u32, x: (f64, f64), y: (f64, f64)) -> usize {
        let z = f64::from(ZOOM);
        let mut n = 0;
        for py in (y.0 * z) as u32..(y.1 * z) as u32 {
            for px in (x.0 * z) as u32..(x.1 * z) as u32 {
                if self.rgb(px, top + py).iter().all(|c| *c > 215) {
                    n += 1;
                }
            }
        }
        n
    }
}

fn hex(s: &str) -> [u8; 3] {
    let s = s.trim_start_matches('#');
    let c = |i: usize| u8::from_str_radix(&s[i..i + 2], 16).unwrap();
    [c(0), c(2), c(4)]
}

fn near(got: [u8; 3], want: [u8; 3], what: &str) {
    let far = got.iter().zip(want).any(|(g, w)| g.abs_diff(w) > 20);
    assert!(!far, "{what}: the screenshot has {got:?}, the badge {want:?}");
}

/// An attribute's number in `svg`, the `n`th occurrence of `name="…"`.
fn attr(svg: &str, name: &str, n: usize) -> f64 {
    let key = format!(" {name}=\"");
    let at = svg.match_indices(&key).nth(n).unwrap_or_else(|| panic!("no {n}th {name} in {svg}")).0 + key.len();
    svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
}

#[test]
fn the_badge_counts_the_must_scenarios_of_the_run_and_renders_in_a_headless_browser() {
    let sb = Sandbox::new();
    let dir = sb.dir.path();
    // A testee that answers under the wrong request id: FAILs (red), with MUST scenarios passing.
    let (red_svg, endpoint_json) = (dir.join("red.svg"), dir.join("endpoint.json"));
    let (o, report) = wrong_rid_run(
        &sb,
        &["calls.*", "conn.socket-*"],
        &["--badge".as_ref(), red_svg.as_ref(), "--badge".as_ref(), endpoint_json.as_ref()],
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    let must: Vec<&Value> =
        report["cases"].as_array().unwrap().iter().filter(|c| c["level"] == "MUST" && c["verdict"] != "SKIP").collect();
    let held = must.iter().filter(|c| matches!(c["verdict"].as_str(), Some("PASS" | "WARN" | "XPASS"))).count();
    assert!(held > 0 && held < must.len(), "{held} of {}", must.len());
    let message = format!("{held}/{} MUST", must.len());
    let endpoint: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("endpoint.json")).unwrap()).unwrap();
    assert_eq!(
        endpoint,
        serde_json::json!({"schemaVersion": 1, "label": "protomcp conformance", "message": message, "color": "red"})
    );
    let red = std::fs::read_to_string(dir.join("red.svg")).unwrap();
    assert!(red.contains(&format!(">{message}</text>")), "{red}");
    // The reference testee: every MUST scenario passes, green.
    let o = sb
        .cmd()
        .args(["--only", "calls.echo", "--only", "calls.add", "--badge"])
        .arg(dir.join("green.svg"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let green = std::fs::read_to_string(dir.join("green.svg")).unwrap();
    assert!(green.contains(">2/2 MUST</text>") && green.contains("fill=\"#44cc11\""), "{green}");
    sb.assert_clean();

    let Some(browser) = chromium_or_skip("the badge's rendering") else { return };
    // Both badges as images, ZOOM times their size, one under the other; then each inline (out
    // of the screenshot) so that a script can lay out its texts without the width the badge
    // gives them.
    let badges = [("red", &red, "#e05d44"), ("green", &green, "#44cc11")];
    let mut page = String::from("<!doctype html><html><body style=\"margin:0;background:#ffffff\">\n");
    for (name, svg, _) in &badges {
        let (w, h) = (attr(svg, "width", 0), attr(svg, "height", 0));
        page.push_str(&format!(
            "<img src=\"{name}.svg\" style=\"display:block;width:{}px;height:{}px;margin-bottom:{ZOOM}px\">\n",
            w * f64::from(ZOOM),
            h * f64::from(ZOOM)
        ));
    }
    page.push_str("<div style=\"position:absolute;top:2000px\">\n");
    for (_, svg, _) in &badges {
        page.push_str(svg);
    }
    page.push_str(
        "</div>\n<pre id=\"widths\"></pre>\n<script>\n\
         const out = [];\n\
         for (const t of document.querySelectorAll('svg text')) {\n\
           const c = t.cloneNode(true);\n\
           c.removeAttribute('textLength');\n\
           c.removeAttribute('lengthAdjust');\n\
           t.parentNode.appendChild(c);\n\
           out.push(t.textContent + '|' + c.getComputedTextLength().toFixed(2) + '|' + t.getAttribute('textLength'));\n\
           c.remove();\n\
         }\n\
         document.getElementById('widths').textContent = 'widths:' + out.join(';') + ':end';\n\
         </script></body></html>\n",
    );
    std::fs::write(dir.join("badge.html"), &page).unwrap();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("badge");
    std::fs::create_dir_all(&out).unwrap();
    let png = out.join("badge.png");
    let _ = std::fs::remove_file(&png);
    let url = format!("file://{}", dir.join("badge.html").display());
    let dom = render_sized(&browser, &url, &png, &dir.join("profile"), (1000, 240));

    // Each text as the browser lays it out in the fonts it has (Verdana, else DejaVu Sans, which
    // has nearly its widths) is within 10% of the width the badge's table gives it.
    let widths = &dom[dom.find("widths:").expect("the script ran") + 7..dom.find(":end").unwrap()];
    let mut n = 0;
    for w in widths.split(';') {
        let f: Vec<&str> = w.split('|').collect();
        let (natural, given): (f64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        assert!(
            (natural - given).abs() / given < 0.10,
            "{}: laid out {natural} px, the badge gives it {given} px",
            f[0]
        );
        eprintln!("{}: laid out {natural} px, given {given} px", f[0]);
        n += 1;
    }
    assert_eq!(n, 8, "two texts (and their shadows) per badge: {widths}");

    // The screenshot: per badge, the grey label box, the message box in the run's colour, white
    // text in each, and the page's white after the badge's width.
    let shot = Shot::read(&png);
    let mut top = 0;
    for (name, svg, colour) in &badges {
        let (lw, w) = (attr(svg, "width", 2), attr(svg, "width", 0));
        let z = f64::from(ZOOM);
        let y = top + 2 * ZOOM;
        near(shot.rgb((lw / 2.0 * z) as u32, y), hex("#555555"), &format!("{name}: label box"));
        near(shot.rgb(((lw + (w - lw) / 2.0) * z) as u32, y), hex(colour), &format!("{name}: message box"));
        near(shot.rgb((w * z) as u32 + 2 * ZOOM, y), [255, 255, 255], &format!("{name}: after the badge"));
        let label = shot.whites(top, (5.0, lw - 5.0), (4.0, 15.0));
        let msg = shot.whites(top, (lw + 5.0, w - 5.0), (4.0, 15.0));
        assert!(label > 200 && msg > 100, "{name}: white text pixels {label} (label), {msg} (message)");
        // Nothing white in the padding left and right of the texts.
        assert_eq!(shot.whites(top, (0.5, 3.0), (4.0, 15.0)), 0, "{name}: text left of the label box's padding");
        assert_eq!(shot.whites(top, (w - 3.0, w - 0.5), (4.0, 15.0)), 0, "{name}: text right of the message");
        top += (attr(svg, "height", 0) as u32 + 1) * ZOOM;
    }
    eprintln!("screenshot: {}", png.display());
}
