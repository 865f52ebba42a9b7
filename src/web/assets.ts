// The web app's only static assets, inlined so the build needs no copy step.
export const APP_CSS = `
:root { --fg:#1d2330; --muted:#5c6577; --line:#dde1e8; --bg:#f7f8fa; --accent:#2857d6; --danger:#b3261e; --ok:#1e7a3c; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif; color:var(--fg); background:var(--bg); }
.visually-hidden { position:absolute; width:1px; height:1px; padding:0; margin:-1px; overflow:hidden; clip:rect(0,0,0,0); white-space:nowrap; border:0; }
header { background:#fff; border-bottom:1px solid var(--line); }
header .bar { max-width:1100px; margin:0 auto; padding:.5rem 1rem; display:flex; gap:.4rem 1.4rem; align-items:center; }
header .brand { font-weight:700; color:var(--fg); text-decoration:none; margin-right:auto; }
nav.sections { display:flex; gap:1.2rem; flex:1; }
nav.sections a, nav.tabs a { color:var(--muted); text-decoration:none; padding:.35rem 0; border-bottom:2px solid transparent; }
nav.sections a[aria-current="page"], nav.tabs a[aria-current="page"] { color:var(--fg); border-bottom-color:var(--accent); }
details.menu { position:relative; min-width:0; }
details.menu summary { cursor:pointer; padding:.3rem .6rem; border:1px solid var(--line); border-radius:6px; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; max-width:18rem; }
details.menu > ul { position:absolute; z-index:10; top:calc(100% + .3rem); margin:0; padding:.3rem 0; list-style:none; background:#fff; border:1px solid var(--line); border-radius:8px; box-shadow:0 4px 16px rgba(0,0,0,.1); min-width:13rem; max-width:calc(100vw - 2rem); }
details.menu li { padding:.35rem .8rem; overflow-wrap:anywhere; } details.menu form { margin:0; }
details.account-menu > ul { left:0; } details.user-menu { margin-left:auto; } details.user-menu > ul { right:0; }
/* Test mode is unmistakable: an orange rule under the header, a banner, the switch on. */
body.test-mode header { border-bottom:3px solid #c2410c; }
.test-banner { background:#fff1e6; color:#7c2d12; border-top:1px solid #fdba74; padding:.4rem 1rem; text-align:center; font-size:.92rem; }
a.switch { margin-left:auto; display:inline-flex; align-items:center; gap:.45rem; color:var(--muted); text-decoration:none; padding:.35rem .2rem; white-space:nowrap; }
a.switch .track { width:2rem; height:1.1rem; border-radius:999px; background:var(--line); position:relative; flex:none; }
a.switch .track::after { content:""; position:absolute; top:.15rem; left:.15rem; width:.8rem; height:.8rem; border-radius:50%; background:#fff; box-shadow:0 1px 2px rgba(0,0,0,.3); }
a.switch[aria-checked="true"] { color:#7c2d12; font-weight:600; }
a.switch[aria-checked="true"] .track { background:#c2410c; } a.switch[aria-checked="true"] .track::after { left:1.05rem; }
nav.subnav { display:flex; flex-wrap:wrap; gap:.4rem; margin:-.4rem 0 1rem; }
nav.subnav a { padding:.3rem .8rem; border-radius:999px; border:1px solid var(--line); color:var(--muted); text-decoration:none; background:#fff; }
nav.subnav a[aria-current="page"] { color:#fff; background:var(--accent); border-color:var(--accent); }
nav.tabs { display:flex; flex-wrap:wrap; gap:.2rem 1.4rem; border-bottom:1px solid var(--line); margin:-.5rem 0 1.2rem; }
main { max-width:1100px; margin:1.5rem auto; padding:0 1rem; }
h1 { font-size:1.5rem; margin:.2rem 0 1rem; } h2 { font-size:1.15rem; margin:2rem 0 .6rem; }
/* A long unbroken value (a key name, a URL, a name) wraps instead of widening its table or heading past the
   page; a column stays wide enough that a short word ("Never", "active") is never broken. */
h1, h2, p, td, th, dd, li { overflow-wrap:anywhere; }
td, th { min-width:5.5rem; } td.actions, th.actions { min-width:0; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:1rem 1.2rem; margin-bottom:1rem; }
.narrow { max-width:28rem; margin:3rem auto; }
label { display:block; font-weight:600; margin:.7rem 0 .2rem; }
.hint { color:var(--muted); font-size:.88rem; font-weight:400; }
input[type=text],input[type=email],input[type=password],input[type=search],input[type=tel],input[type=url],input[type=number],input[type=datetime-local],input[type=file],select,textarea { width:100%; padding:.5rem .6rem; border:1px solid #b9c0cc; border-radius:6px; font:inherit; background:#fff; }
input:focus,select:focus,button:focus,a:focus { outline:3px solid #9db6f5; outline-offset:1px; }
button,.button { display:inline-block; padding:.45rem .9rem; border-radius:6px; border:1px solid var(--accent); background:var(--accent); color:#fff; font:inherit; cursor:pointer; text-decoration:none; }
button.secondary,.button.secondary { background:#fff; color:var(--accent); }
button.danger,.button.danger { background:var(--danger); border-color:var(--danger); color:#fff; }
.inline { display:inline; } .row { display:flex; gap:.6rem; align-items:flex-end; flex-wrap:wrap; } .row > * { flex:1; min-width:10rem; }
.row > .shrink { flex:0 0 auto; min-width:0; }
table { width:100%; border-collapse:collapse; background:#fff; }
th,td { text-align:left; padding:.5rem .6rem; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:.85rem; color:var(--muted); font-weight:600; }
.table-wrap { overflow-x:auto; border:1px solid var(--line); border-radius:8px; }
.error { color:var(--danger); font-size:.9rem; margin:.2rem 0; }
.alert { padding:.7rem 1rem; border-radius:6px; margin-bottom:1rem; border:1px solid; }
.alert.error { background:#fdecea; border-color:#f5c2bd; color:var(--danger); font-size:1rem; }
.alert.ok { background:#e8f5ec; border-color:#b9e0c6; color:var(--ok); }
.alert.warn { background:#fff7e0; border-color:#f0d58a; color:#6b4e00; }
.status { font-size:.8rem; padding:.1rem .45rem; border-radius:999px; border:1px solid var(--line); }
.status.active,.status.enabled,.status.succeeded { color:var(--ok); border-color:#b9e0c6; } .status.revoked,.status.expired,.status.disabled,.status.failed { color:var(--danger); border-color:#f5c2bd; }
.status.retrying { color:#6b4e00; border-color:#f0d58a; }
pre.payload { background:#fff; border:1px solid var(--line); border-radius:6px; padding:.7rem; overflow-x:auto; white-space:pre-wrap; word-break:break-all; font-size:.85rem; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:.3rem 1rem; margin:0; } dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
.actions-row { display:flex; gap:.6rem; flex-wrap:wrap; align-items:flex-end; } .actions-row form { margin:0; display:flex; gap:.4rem; align-items:flex-end; } .actions-row label { margin:0; } .actions-row select { width:auto; } .actions-row button { white-space:nowrap; }
fieldset { border:1px solid var(--line); border-radius:6px; margin:.8rem 0; } legend { font-weight:600; }
label.check { font-weight:400; margin:.2rem 0; } label.check input { margin-right:.3rem; }
code,.mono { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:.9rem; }
td.mono { white-space:nowrap; }
.secret { display:flex; gap:.5rem; } .secret input { font-family:ui-monospace,monospace; }
.pager { margin-top:1rem; display:flex; gap:.6rem; }
svg.usage rect { fill:var(--accent); } svg.usage rect.zero { fill:var(--line); }
.actions { white-space:nowrap; } .actions form { margin:0; } .actions > * + * { margin-left:.3rem; }
.inline-form { display:inline-flex; gap:.3rem; align-items:center; margin:0; } .inline-form select { width:auto; }
.settings-list { padding-left:1.2rem; } .settings-list li { margin:.4rem 0; }
/* Phones: the header's sections get a row of their own, and the tables marked .cards turn each row
   into a card whose cells carry their column's name (data-label), so no action is off-screen. */
@media (max-width:640px){
  th.optional,td.optional { display:none; }
  /* Row 1: the account (at most 11rem) and the person's menu (9.5rem) side by side; row 2: sections. */
  header .bar { flex-wrap:wrap; column-gap:.6rem; }
  nav.sections { order:3; flex-basis:100%; }
  details.account-menu summary { max-width:11rem; }
  details.user-menu summary { max-width:9.5rem; }
  main { margin-top:1rem; }
  .table-wrap:has(table.cards) { border:0; overflow:visible; }
  table.cards { background:transparent; }
  table.cards thead { position:absolute; width:1px; height:1px; overflow:hidden; clip:rect(0,0,0,0); }
  table.cards, table.cards tbody, table.cards tr, table.cards td { display:block; }
  table.cards tr { background:#fff; border:1px solid var(--line); border-radius:8px; padding:.4rem 0; margin-bottom:.6rem; }
  table.cards td { border:0; padding:.2rem .8rem; overflow-wrap:anywhere; white-space:normal; min-width:0; }
  table.cards td[data-label]::before { content:attr(data-label); display:inline-block; min-width:7rem; margin-right:.4rem; color:var(--muted); font:600 .85rem/1.5 system-ui,-apple-system,"Segoe UI",sans-serif; }
  table.cards caption { display:block; text-align:left; margin-bottom:.4rem; }
  table.cards td:first-child { font-weight:600; }
  table.cards td.actions { padding-top:.4rem; display:flex; flex-wrap:wrap; gap:.4rem; }
  table.cards td.actions > * + * { margin-left:0; }
  .actions-row form { flex-wrap:wrap; } .actions-row form label { flex-basis:100%; }
  td.mono, pre.payload { white-space:normal; overflow-wrap:anywhere; }
  dl.facts { grid-template-columns:1fr; gap:0; } dl.facts dd { margin-bottom:.4rem; overflow-wrap:anywhere; }
  h1 { overflow-wrap:anywhere; }
}
`

/**
 * The copy button, and the header's menus: one open at a time, closed by Escape. The pages work
 * without it.
 */
export const APP_JS = `
var menus = document.querySelectorAll('details.menu');
menus.forEach(function (menu) {
  menu.addEventListener('toggle', function () {
    if (!menu.open) return;
    menus.forEach(function (other) { if (other !== menu) other.open = false; });
  });
});
document.addEventListener('keydown', function (event) {
  if (event.key !== 'Escape') return;
  menus.forEach(function (menu) {
    if (menu.open) { menu.open = false; menu.querySelector('summary').focus(); }
  });
});
document.querySelectorAll('[data-copy]').forEach(function (button) {
  button.hidden = false;
  button.addEventListener('click', function () {
    var input = document.getElementById(button.getAttribute('data-copy'));
    navigator.clipboard.writeText(input.value).then(function () { button.textContent = 'Copied'; });
  });
});
`
