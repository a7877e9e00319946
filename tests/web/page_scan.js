// Two accessibility rules, checked in the page as a browser renders it (axe-core's "label" and
// "color-contrast", written out here because axe-core is not vendored). Returns
// {unlabelled: [...], contrast: [...], checked: N}: each unlabelled form field, and each visible
// text whose colour is below 4.5:1 against the background it is drawn on.
const skipped = new Set(["hidden", "submit", "button", "reset", "image"]);
const unlabelled = [];
for (const field of document.querySelectorAll("input, select, textarea")) {
  if (skipped.has((field.getAttribute("type") || "").toLowerCase())) continue;
  const named =
    (field.id && document.querySelector(`label[for="${CSS.escape(field.id)}"]`)) ||
    field.closest("label") ||
    (field.getAttribute("aria-label") || "").trim() ||
    (field.getAttribute("aria-labelledby") || "").trim();
  if (!named) unlabelled.push(field.outerHTML.slice(0, 160));
}

function rgba(text) {
  const parts = text.match(/[\d.]+/g).map(Number);
  return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
}
function over(top, bottom) {
  // A translucent colour as it shows over an opaque one.
  const a = top[3];
  return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat([1]);
}
function background(element) {
  // The colours behind an element, nearest first, down to the first opaque one.
  const layers = [];
  for (let node = element; node; node = node.parentElement) {
    const colour = rgba(getComputedStyle(node).backgroundColor);
    if (colour[3] > 0) layers.push(colour);
    if (colour[3] >= 1) break;
  }
  let result = [255, 255, 255, 1];
  if (!layers.length || layers[layers.length - 1][3] < 1) {
    // The canvas: the root's colour scheme decides it when nothing paints a background.
    const dark = getComputedStyle(document.documentElement).colorScheme.includes("dark");
    result = dark ? [18, 18, 18, 1] : [255, 255, 255, 1];
  }
  for (const layer of layers.reverse()) result = over(layer, result);
  return result;
}
function luminance(colour) {
  const [r, g, b] = colour.slice(0, 3).map((v) => {
    const c = v / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
function ratio(a, b) {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (light + 0.05) / (dark + 0.05);
}
function shown(element) {
  for (let node = element; node; node = node.parentElement) {
    const style = getComputedStyle(node);
    if (style.display === "none" || style.visibility === "hidden" || style.opacity === "0") {
      return false;
    }
  }
  const box = element.getBoundingClientRect();
  return box.width > 0 && box.height > 0;
}

const contrast = [];
let checked = 0;
for (const element of document.body.querySelectorAll("*")) {
  if (element.closest("svg, option, script, style, noscript")) continue;
  const own = [...element.childNodes].some(
    (n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim()
  );
  const typed = element.matches("input:not([type=hidden]), select, textarea, button");
  if (!(own || typed) || !shown(element)) continue;
  checked += 1;
  const back = background(element);
  const fore = over(rgba(getComputedStyle(element).color), back);
  const found = ratio(fore, back);
  if (found < 4.5) {
    contrast.push({
      element: element.outerHTML.slice(0, 120),
      text: (element.textContent || element.value || "").trim().slice(0, 40),
      colour: getComputedStyle(element).color,
      background: `rgb(${back.slice(0, 3).map(Math.round).join(", ")})`,
      ratio: Math.round(found * 100) / 100,
    });
  }
}
return { unlabelled, contrast, checked };
