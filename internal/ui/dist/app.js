var N,ct,pn,Y,Le,we,dt,ve,ut,je,Me,_n,ue=Symbol.for("pv"),xe={},Se=[],fn=/^m(i|n|o|s|text|space)$/,Be=Array.isArray,qe=Se.slice,te=Object.assign;function ee(e){e&&e.parentNode&&e.remove()}function pt(e,t,n){var s,a,o,r={},i=arguments.length;for(o in t)o=="key"?s=t[o]:o=="ref"&&typeof e!="function"?a=t[o]:r[o]=t[o];return i>2&&(r.children=i>3?qe.call(arguments,2):n),de(e,r,s,a,null)}function de(e,t,n,s,a){var o={type:e,props:t,key:n,ref:s,__k:null,__:null,__b:0,__e:null,__c:null,constructor:ue,__v:a||++ct,__i:-1,__u:0};return!a&&N.vnode&&N.vnode(o),o}function Ce(e){return e.children}function be(e,t){this.props=e,this.context=t,this.__g=0}function X(e,t){if(t==null)return e.__&&X(e.__,e.__i+1);for(var n;t<e.__k.length;t++)if((n=e.__k[t])&&n.__e)return n.__e;return typeof e.type!="function"||e.props.__P?null:X(e)}function mn(e){var t,n=e.__v,s=n.__e,a=[],o=[],r=e.__P;r&&((t=te({constructor:ue},n)).__v=n.__v+1,N.vnode&&N.vnode(t),He(r,t,n,e.__n,r.namespaceURI,32&n.__u?[s]:null,a,s||X(n),32&n.__u,o),t.__v=n.__v,t.__.__k[t.__i]=t,gt(a,t,o),n.__=n.__e=null,t.__e!=s&&_t(t))}function _t(e){if((e=e.__)&&e.__c&&!e.props.__P)return e.__e=null,e.__k.some(function(t){return t&&(e.__e=t.__e)}),_t(e)}function it(e){(8&e.__g||(e.__g|=8,Y.push(e),we++))&&Le==N.debounceRendering||((Le=N.debounceRendering)||queueMicrotask)(ft)}function ft(){try{for(var e,t=1;Y.length;)Y.length>t&&Y.sort(dt),e=Y.shift(),t=Y.length,8&e.__g&&mn(e)}finally{(we=Y.length)&&(Le||queueMicrotask)(ft)}}function mt(e,t,n,s,a,o,r,i,p,f,c){var _,d,l,m,w,$,S=s.__k||Se,b=t.length;for(p=hn(n,t,S,p,b),_=0;_<b;_++)(l=n.__k[_])!=null&&(d=~l.__i&&S[l.__i]||xe,l.__i=_,$=He(e,l,d,a,o,r,i,p,f,c),m=l.__e,(d.ref!=l.ref||8&d.__u)&&(d.ref&&Fe(d.ref,null,l,d),l.ref&&c.push(l.ref,l.__c||m,l)),w=w||m,4&l.__u?(p=ht(l,p,e,!d.__v),d.__e&&(d.__e=null)):typeof l.type=="function"&&$!==void 0?p=$:m&&(p=m.nextSibling),l.__u&=-21);return n.__e=w,p}function hn(e,t,n,s,a){var o,r,i,p,f,c,_,d,l,m=n.length,w=m,$=0,S=0,b=e.__k=Array(a);for(o=0;o<a;o++)(r=t[o])!=null&&typeof r!="boolean"&&typeof r!="function"?(typeof r!="object"||r.constructor===String?r=b[o]=de(null,r):Be(r)?r=b[o]=de(Ce,{children:r}):r.constructor===ue&&r.__b?r=b[o]=de(r.type,r.props,r.key,r.ref,r.__v):b[o]=r,p=o+$,r.__=e,r.__b=e.__b+1,i=null,~(f=r.__i=$n(r,n,p,w))&&(w--,(i=n[f])&&(i.__u|=2)),i&&i.__v?(r.__u|=16,f==p-1?$--:f==p+1?$++:f!=p&&(f>p?$--:$++,S=1)):(~f||(a>m?$--:a<m&&$++),typeof r.type!="function"&&(r.__u|=4))):b[o]=null;if(S){for(c=[],_=[],o=0;o<a;o++)if((r=b[o])&&16&r.__u){for($=0,d=c.length;$<d;)c[l=$+d>>1]<r.__i?$=l+1:d=l;c[$]=r.__i,_[o]=$+1}for($=c.length;o--;)_[o]&&(_[o]==$?$--:b[o].__u|=4)}if(w)for(o=0;o<m;o++)!(i=n[o])||2&i.__u||(i.__e==s&&(s=X(i)),ze(i,i));return s}function ht(e,t,n,s){var a,o,r,i;if(typeof e.type=="function"){if(e.props.__P)return t;if(a=e.__k)for(o=0;o<a.length;o++)a[o]&&(a[o].__=e,t=ht(a[o],t,n,!1));return t}for(t&&!t.parentNode&&(t=X(e))&&!t.parentNode&&(t=null),r=e.__e,i=t;i&&i.nodeType==8;)i=i.nextSibling;for(r!=i&&(!s&&n.moveBefore&&r.parentNode?n.moveBefore(r,t):n.insertBefore(r,t||null)),t=r;(t=t&&t.nextSibling)&&t.nodeType==8&&!t.data.startsWith("$s"););return t}function $n(e,t,n,s){var a,o=e.key,r=e.type,i=t[n],p=i&&!(2&i.__u);if(i===null&&o==null||p&&o==i.key&&r==i.type)return n;if(s>(p?1:0)){for(a=n-1;a>=0;a--)if((i=t[a])&&!(2&i.__u)&&o==i.key&&r==i.type)return a;for(a=n+1;a<t.length;a++)if((i=t[a])&&!(2&i.__u)&&o==i.key&&r==i.type)return a}return-1}function lt(e,t,n){n==null&&(n=""),t[0]=="-"?e.setProperty(t,n):e[t]=n}function ye(e,t,n,s,a){var o,r;if(t=="style")if(typeof n=="string")e.style.cssText=n;else{if(typeof s=="string"&&(e.style.cssText=s=""),s)for(t in s)n&&t in n||lt(e.style,t);if(n)for(t in n)s&&n[t]==s[t]||lt(e.style,t,n[t])}else if(t[0]=="o"&&t[1]=="n")typeof n!="function"&&(n=null),typeof s!="function"&&(s=null),(e.__e||(e.__e={}))[t]=n,n&&s||(r=Me[t]||(Me[t]=gn(t)),(e.__a||(e.__a={}))[t]=je,o=t!=(t=t.replace(ut,"$1")),(t=t.slice(2))[0]<"a"&&(t=t.toLowerCase()),n?e.addEventListener(t,r,o):e.removeEventListener(t,r,o));else{if(a=="http://www.w3.org/2000/svg")t=t.replace(/xlink(H|:h)/,"h").replace(/sName$/,"s");else if(t!="width"&&t!="height"&&t!="href"&&t!="list"&&t!="form"&&t!="tabIndex"&&t!="download"&&t!="rowSpan"&&t!="colSpan"&&t!="role"&&t!="popover"&&t in e)try{return void(e[t]=n??"")}catch{}if(typeof n=="function")return;n==null||n===!1&&t[4]!="-"?e.removeAttribute(t):e.setAttribute(t,t=="popover"&&n==1?"":n)}}function gn(e){return function(t){var n=this.__e;if(n){if(n=n[e],t[ve]==null)t[ve]=je++;else if(t[ve]<this.__a[e])return;return n(N.event?N.event(t):t)}}}function He(e,t,n,s,a,o,r,i,p,f){var c,_,d,l,m,w,$,S,b,P,C,H,F,z,y,g,v,x,T=t.type;if(t.constructor!==ue)return null;128&n.__u&&(p=32&n.__u,c=n.__c.__z)&&(t.__u|=p,_=o=[],c.nodeType==8?i=ke(c,o):o.push(c),i=o[0]||i),(c=N.__b)&&c(t);e:if(typeof T=="function"){d=r.length;try{if(S=t.props,b=(c=T.prototype)&&c.render,P=(c=T.contextType)&&s[c.__c],C=c?P?P.props.value:c.__:s,(l=n.__c)?(t.__c=l,2&l.__g&&(l.__g|=1)):(b?t.__c=l=new T(S,C):(t.__c=l=new be(S,C),l.constructor=T,l.render=vn),P&&P.sub(l),l.state||(l.state={}),l.__n=s,l.__g|=8,l.__h=[],l.__k=[]),b&&(l.__s||(l.__s=l.state),T.getDerivedStateFromProps&&(l.__s==l.state&&(l.__s=te({},l.__s)),te(l.__s,T.getDerivedStateFromProps(S,l.__s)))),m=l.props,w=l.state,l.__v=t,n.__c){if(S!==m&&b&&!T.getDerivedStateFromProps&&l.componentWillReceiveProps&&l.componentWillReceiveProps(S,C),t.__v==n.__v&&!(8&l.__g)||!(4&l.__g)&&l.shouldComponentUpdate&&l.shouldComponentUpdate(S,l.__s,C)===!1){t.__v!=n.__v&&(l.props=S,l.state=l.__s,l.__g&=-9),t.__e=n.__e,t.__k=n.__k,t.__k.some(function(h){h&&(h.__=t)}),Se.push.apply(l.__h,l.__k),l.__k=[],l.__h.length&&r.push(l),i=X(n);break e}l.componentWillUpdate&&l.componentWillUpdate(S,l.__s,C),b&&l.componentDidUpdate&&l.__h.push(function(){l.componentDidUpdate(m,w,$)})}else b&&!T.getDerivedStateFromProps&&l.componentWillMount&&l.componentWillMount(),b&&l.componentDidMount&&l.__h.push(l.componentDidMount);l.context=C,l.props=S,l.__P=e,l.__g&=-5,H=N.__r,F=b?25:0;do l.__g&=-9,H&&H(t),c=l.render(l.props,l.state=l.__s,l.context);while(8&l.__g&&++F<25);b&&(Se.push.apply(l.__h,l.__k),l.__k=[]),l.state=l.__s,l.getChildContext&&(s=te({},s,l.getChildContext())),b&&n.__c&&l.getSnapshotBeforeUpdate&&($=l.getSnapshotBeforeUpdate(m,w)),z=c&&c.type===Ce&&c.key==null?c.props.children:c,S.__P&&(c=i,a=(e=S.__P).namespaceURI,p=o=null,n.props&&n.props.__P!=e&&(n.__k.some(function(h){h&&ze(h,h)}),n.__k=null),i=n.__k?X(n,0):null),i=mt(e,Be(z)?z:[z],t,n,s,a,o,r,i,p,f),S.__P&&(t.__e=null,i=c),t.__u&=-161,_&&_.some(ee),l.__h.length&&r.push(l),1&l.__g&&(l.__g&=-4)}catch(h){if(r.length=d,t.__v=null,p||o)if(h&&h.then){if(t.__u|=128|p,o){for(~(v=o.indexOf(i||void 0))||(v=o.length);(x=o[v-1])&&x.nodeType==8;)v--;for(;v<o.length;v++)if(x=o[v])if(o[v]=null,y){if(x==g)break}else{if(x.nodeType!=8)break;x.data.startsWith("$s")&&(g=ke(y=x))}}if(!y){for(;i&&i.nodeType==8&&i.nextSibling;)i=i.nextSibling;y=i}(c=ke(y=t.__c.__z||(t.__c.__z=y)))?(t.__e=y,i=c):t.__e=i,i=i&&i.nextSibling}else o&&o.some(ee);else t.__e=n.__e;t.__k||(t.__k=n.__k||[]),h&&h.then||$t(t),N.__e(h,t,n)}}else i=t.__e=yn(n.__e,t,n,s,a,o,r,p,f,e);return(c=N.diffed)&&c(t),i}function ke(e,t){if(e&&e.nodeType==8&&e.data.startsWith("$s"))for(var n=1;e=e.nextSibling;){if(e.nodeType==8){if(e.data.startsWith("$s"))n++;else if(e.data.startsWith("/$s")&&!--n)return e}t&&t.push(e)}}function $t(e){e&&(e.__c&&(e.__c.__g|=4),e.__k&&e.__k.some($t))}function gt(e,t,n){for(var s=0;s<n.length;)Fe(n[s++],n[s++],n[s++]);N.__c&&N.__c(t,e),e.some(function(a){try{e=a.__h,a.__h=[],e.some(function(o){o.call(a)})}catch(o){N.__e(o,a.__v)}})}function yn(e,t,n,s,a,o,r,i,p,f){var c,_,d,l,m,w,$,S,b=n.props||xe,P=t.props,C=t.type;if(C=="svg"?a="http://www.w3.org/2000/svg":C=="math"?a="http://www.w3.org/1998/Math/MathML":a||(a="http://www.w3.org/1999/xhtml"),o){for(c=0;c<o.length;c++)if((m=o[c])&&(C?m.localName==C:m.nodeType==3)){e=m,o[c]=null;break}}if(!e){if(S=f.ownerDocument||document,!C)return S.createTextNode(P);e=S.createElementNS(a,C,P.is?P:f),i&&(N.__m&&N.__m(t,o),i=!1),o=null}if(C){if(f=C=="template"&&e.content||e,o=C=="textarea"&&P.defaultValue!=null?null:o&&qe.call(f.childNodes),!i&&o)for(b={},c=0;c<e.attributes.length;c++)b[(m=e.attributes[c]).name]=m.value;for(c in b)m=b[c],c=="dangerouslySetInnerHTML"?d=m:c=="children"||c in P||c=="value"&&"defaultValue"in P||c=="checked"&&"defaultChecked"in P||ye(e,c,null,m,a);for(c in P)m=P[c],c=="children"?l=m:c=="dangerouslySetInnerHTML"?_=m:c=="value"?w=m:c=="checked"?$=m:i&&typeof m!="function"||b[c]===m||ye(e,c,m,b[c],a);_?(i||d&&(_.__html==d.__html||_.__html==e.innerHTML)||(e.innerHTML=_.__html),t.__k=[]):(d&&(e.textContent=""),(C=="foreignObject"||a=="http://www.w3.org/1998/Math/MathML"&&fn.test(C))&&(a="http://www.w3.org/1999/xhtml"),mt(f,Be(l)?l:[l],t,n,s,a,o,r,o?o[0]:n.__k&&X(n,0),i,p),o&&o.some(ee)),i&&C!="textarea"||(c="value",C=="progress"&&w==null?e.removeAttribute(c):w==null||w===e[c]&&(C!="progress"||w)||ye(e,c,w,b[c],a),c="checked",$!=null&&$!=e[c]&&ye(e,c,$,b[c],a))}else b===P||i&&e.data==P||(e.data=P);return e}function Fe(e,t,n,s){try{typeof e=="function"?t?t.__x=e(t)||1:s&&(s=s.__c||s.__e)&&(t=s.__x)&&(s.__x=null,typeof t=="function"?t():e(null)):e.current=t}catch(a){N.__e(a,n)}}function ze(e,t,n){var s,a,o,r;if(N.unmount&&N.unmount(e),!(s=e.ref)||s.current&&s.current!=e.__e||Fe(s,null,t,e),s=e.__c){if(s.componentWillUnmount)try{s.componentWillUnmount()}catch(i){N.__e(i,t)}s.__P=s.__n=null}if(s=e.__k)for(r=0;r<s.length;r++)s[r]&&ze(s[r],t,typeof e.type!="function"||n&&!e.props.__P);!n&&(s=e.__c)&&(s=s.__z)&&(a=ke(s,o=[]))&&(s==e.__e&&o.some(ee),ee(a),ee(s)),n||ee(e.__e),e.__e=e.__c=e.__=null}function vn(e,t,n){return this.constructor(e,n)}function yt(e,t){var n,s,a,o;N.__&&N.__(e,t),t.nodeType==9&&(t=t.documentElement),s=(n=e&&32&e.__u)?null:t.__k,t.__k=de(Ce,{children:[e]}),a=[],o=[],He(t,t.__k,s||xe,xe,t.namespaceURI,s?null:t.firstChild?qe.call(t.childNodes):null,a,s?s.__e:t.firstChild,n,o),gt(a,t.__k,o),t.__k.props.children=null}N={__e:function(e,t,n,s){for(var a,o,r;t=t.__;)if((a=t.__c)&&!(1&a.__g)){a.__g|=4;try{if((r=(o=a.constructor)&&o.getDerivedStateFromError)&&a.setState(o.getDerivedStateFromError(e)),a.componentDidCatch&&(a.componentDidCatch(e,s||{}),r=1),r&&8&a.__g)return void(a.__g|=2)}catch(i){e=i}}throw we=0,e}},ct=0,pn=function(e){return e!=null&&e.constructor===ue},be.prototype.setState=function(e,t){var n=this.__s;n&&n!=this.state||(n=this.__s=te({},this.state)),typeof e=="function"&&(e=e(te({},n),this.props)),e&&(te(n,e),this.__v&&(t&&this.__k.push(t),it(this)))},be.prototype.forceUpdate=function(e){this.__v&&(this.__g|=4,e&&this.__h.push(e),it(this))},be.prototype.render=Ce,Y=[],we=0,dt=function(e,t){return e.__v.__b-t.__v.__b},ve=Symbol(),ut=/(PointerCapture)$|Capture$/i,je=0,Me={},_n=0;var _e,O,We,vt,Ve=Object.is,fe=0,Nt=[],Je=[],A=N,bt=A.__b,kt=A.__r,wt=A.diffed,xt=A.__c,St=A.unmount,Ct=A.__;function Ge(e,t){A.__h&&A.__h(O,e,fe||t),fe=0;var n=O.__H||(O.__H={__:[],__h:[]});return e>=n.__.length&&n.__.push({}),n.__[e]}function k(e){return fe=1,bn(At,e)}function bn(e,t,n){var s=Ge(_e++,2);if(s.t=e,!s.__c&&(s.__=[n?n(t):At(void 0,t),function(o){var r=(s.__N||s.__)[0],i=s.t(r,o);Ve(r,i)||(s.__N=[i,s.__[1]],s.__c.setState({}))}],s.__c=O,!O.__f)){O.__f=!0;var a=O.shouldComponentUpdate;O.shouldComponentUpdate=function(o,r,i){var p=this.__H;if(!p)return!0;var f=!1,c=this.props!=o;if(p.__.some(function(d){d.__N&&(f=!0,Ve(d.__[0],d.__N[0])||(c=!0))}),a){var _=a.call(this,o,r,i);return f?_||c:_}return!f||c}}return s.__}function j(e,t){var n=Ge(_e++,3);!A.__s&&Rt(n.__H,t)&&(n.__P=!0,n.__=e,n.u=t,O.__H.__h.push(n))}function Q(e){return fe=5,Et(function(){return{current:e}},[])}function Et(e,t){var n=Ge(_e++,7);return Rt(n.__H,t)&&(n.__=e(),n.__H=t),n.__}function me(e,t){return fe=8,Et(function(){return e},t)}function kn(){var e;do{for(;e=Je.shift();)try{pe(e)}catch(n){A.__e(n,{__:(e=e.__P)&&e.__v})}for(;e=Nt.shift();){var t=e.__H;if(e.__P&&t)try{t.__h.some(pe),t.__h.some(Ke),t.__h=[]}catch(n){t.__h=[],A.__e(n,e.__v)}}}while(Je.length)}A.__b=function(e){O=null,bt&&bt(e)},A.__=function(e,t){e&&t.__k&&t.__k.__m&&(e.__m=t.__k.__m),Ct&&Ct(e,t)},A.__r=function(e){kt&&kt(e),_e=0;var t=(O=e.__c).__H;t&&(We==O?O.__h=[]:(t.__h.some(pe),t.__h.some(Ke),_e=0),t.__h=[],t.__.some(function(n){n.__N&&(n.__=n.__N),n.u=n.__N=void 0})),We=O},A.diffed=function(e){wt&&wt(e);var t=e.__c;t&&t.__H&&(t.__H.__h.length&&Pt(Nt.push(t)),t.__H.__.some(function(n){n.u&&(n.__H=n.u)})),We=O=null},A.__c=function(e,t){t.some(function(n){try{n.__h.some(pe),n.__h=n.__h.filter(function(s){return!s.__||Ke(s)})}catch(s){n.__h=[function(){throw s}]}}),xt&&xt(e,t)},A.unmount=function(e){St&&St(e);var t,n,s=e.__c;s&&s.__H&&(s.__H.__.some(function(a){try{if(a.__P&&a.__c){if(n===void 0){for(n=e.__;n&&(!n.__c||!n.__c.__P);)n=n.__;n=n&&n.__c}a.__P=n,Pt(Je.push(a))}else pe(a)}catch(o){t=o}}),s.__H=void 0,t&&A.__e(t,s.__v))};var Tt=typeof requestAnimationFrame=="function";function wn(e){var t,n=function(){clearTimeout(s),Tt&&cancelAnimationFrame(t),setTimeout(e)},s=setTimeout(n,35);Tt&&(t=requestAnimationFrame(n))}function Pt(e){e!=1&&vt==A.requestAnimationFrame||((vt=A.requestAnimationFrame)||wn)(kn)}function pe(e){var t=O,n=e.__c;typeof n=="function"&&(e.__c=void 0,n()),O=t}function Ke(e){var t=O;e.__c=e.__(),O=t}function Rt(e,t){return!e||e.length!=t.length||t.some(function(n,s){return!Ve(n,e[s])})}function At(e,t){return typeof t=="function"?t(e):t}var It=function(e,t,n,s){var a;t[0]=0;for(var o=1;o<t.length;o++){var r=t[o++],i=t[o]?(t[0]|=r?1:2,n[t[o++]]):t[++o];r===3?s[0]=i:r===4?s[1]=Object.assign(s[1]||{},i):r===5?(s[1]=s[1]||{})[t[++o]]=i:r===6?s[1][t[++o]]+=i+"":r?(a=e.apply(i,It(e,i,n,["",null])),s.push(a),i[0]?t[0]|=2:(t[o-2]=0,t[o]=a)):s.push(i)}return s},Ot=new Map;function Ut(e){var t=Ot.get(this);return t||(t=new Map,Ot.set(this,t)),(t=It(this,t.get(e)||(t.set(e,t=(function(n){for(var s,a,o=1,r="",i="",p=[0],f=function(d){o===1&&(d||(r=r.replace(/^\s*\n\s*|\s*\n\s*$/g,"")))?p.push(0,d,r):o===3&&(d||r)?(p.push(3,d,r),o=2):o===2&&r==="..."&&d?p.push(4,d,0):o===2&&r&&!d?p.push(5,0,!0,r):o>=5&&((r||!d&&o===5)&&(p.push(o,0,r,a),o=6),d&&(p.push(o,d,0,a),o=6)),r=""},c=0;c<n.length;c++){c&&(o===1&&f(),f(c));for(var _=0;_<n[c].length;_++)s=n[c][_],o===1?s==="<"?(f(),p=[p],o=3):r+=s:o===4?r==="--"&&s===">"?(o=1,r=""):r=s+r[0]:i?s===i?i="":r+=s:s==='"'||s==="'"?i=s:s===">"?(f(),o=1):o&&(s==="="?(o=5,a=r,r=""):s==="/"&&(o<5||n[c][_+1]===">")?(f(),o===3&&(p=p[0]),o=p,(p=p[0]).push(2,0,o),o=0):s===" "||s==="	"||s===`
`||s==="\r"?(f(),o=2):r+=s),o===3&&r==="!--"&&(o=4,p=p[0])}return f(),p})(e)),t),arguments,[])).length>1?t:t[0]}var u=Ut.bind(pt);var Ye="/ui";function B(e,{replace:t=!1}={}){t?history.replaceState(null,"",e):history.pushState(null,"",e),dispatchEvent(new PopStateEvent("popstate"))}function Dt(){let[e,t]=k(location.pathname+location.search);return j(()=>{let n=()=>t(location.pathname+location.search);return addEventListener("popstate",n),()=>removeEventListener("popstate",n)},[]),e}function Lt(e){let t=e.split("?")[0].replace(/\/+$/,""),n;return t===Ye||t===""?{name:"sessions",params:{}}:(n=t.match(/^\/ui\/sessions\/([^/]+)$/))?{name:"session",params:{id:decodeURIComponent(n[1])}}:(n=t.match(/^\/ui\/runs\/([^/]+)$/))?{name:"run",params:{id:decodeURIComponent(n[1])}}:t==="/ui/bundles"?{name:"bundles",params:{}}:t==="/ui/callback"?{name:"callback",params:{}}:t==="/ui/sign-in"?{name:"sign-in",params:{}}:{name:"not-found",params:{}}}function U(e){if(e.defaultPrevented||e.button!==0||e.metaKey||e.ctrlKey||e.shiftKey||e.altKey)return;let n=e.currentTarget.getAttribute("href");!n||!n.startsWith(Ye+"/")&&n!==Ye||(e.preventDefault(),B(n))}var Xe="hxd.console.pkce",Ze="/ui/callback",Qe="/ui/sign-in",Te,K=null,he=null,Pe="",Ne="/ui/",xn=new Set;function $e(){if(Te===void 0){Te={oidc:null};let e=typeof document<"u"&&document.getElementById("hxd-console-config");if(e)try{let t=JSON.parse(e.textContent);t&&typeof t=="object"&&t.oidc&&typeof t.oidc.issuer=="string"&&(Te={oidc:t.oidc})}catch{}}return Te}function ae(){return K!==null&&qt(K)&&et("Your session expired: sign in again."),K}function Ee(e){if(clearTimeout(he),he=null,K=typeof e=="string"&&e.trim()!==""?e.trim():null,K!==null){Pe="";let t=Bt(K)?.exp;if(typeof t=="number"){let n=t*1e3-Date.now();n<2**31-1&&(he=setTimeout(()=>et("Your session expired: sign in again."),Math.max(n,0)))}}jt()}function Re(){et(K!==null?"The API refused the token: sign in again.":"")}function et(e){clearTimeout(he),he=null,K=null,Pe=e,jt(),typeof location<"u"&&location.pathname!==Qe&&location.pathname!==Ze&&(Ne=nt(location.pathname+location.search),B(Qe))}function jt(){for(let e of[...xn])e(K)}function Bt(e){if(typeof e!="string")return null;let t=e.split(".");if(t.length!==3)return null;try{let n=t[1].replace(/-/g,"+").replace(/_/g,"/"),s=atob(n+"=".repeat((4-n.length%4)%4)),a=JSON.parse(new TextDecoder().decode(Uint8Array.from(s,o=>o.charCodeAt(0))));return a&&typeof a=="object"?a:null}catch{return null}}function qt(e){let t=Bt(e)?.exp;return typeof t=="number"&&t*1e3<=Date.now()}function Ht(e){let t="";for(let n of e)t+=String.fromCharCode(n);return btoa(t).replace(/\+/g,"-").replace(/\//g,"_").replace(/=+$/,"")}function Mt(){return Ht(crypto.getRandomValues(new Uint8Array(32)))}async function Sn(e){let t=e.replace(/\/+$/,"")+"/.well-known/openid-configuration",n=await fetch(t,{headers:{Accept:"application/json"}});if(!n.ok)throw new Error(`the provider's discovery answered ${n.status}`);let s=await n.json();if(typeof s.authorization_endpoint!="string"||typeof s.token_endpoint!="string")throw new Error("the provider's discovery document lacks its endpoints");return s}function Ft(){return window.location.origin+Ze}async function tt(e){let t=$e().oidc;if(!t||!t.client_id)throw new Error("no console client is configured (--oidc-console-client-id)");let n=await Sn(t.issuer),s=Mt(),a=Mt(),o=new Uint8Array(await crypto.subtle.digest("SHA-256",new TextEncoder().encode(s)));sessionStorage.setItem(Xe,JSON.stringify({state:a,verifier:s,token_endpoint:n.token_endpoint,return_to:nt(e)}));let r=new URL(n.authorization_endpoint);r.searchParams.set("response_type","code"),r.searchParams.set("client_id",t.client_id),r.searchParams.set("redirect_uri",Ft()),r.searchParams.set("scope",t.scope||"openid"),r.searchParams.set("state",a),r.searchParams.set("code_challenge",Ht(o)),r.searchParams.set("code_challenge_method","S256"),t.audience&&r.searchParams.set("audience",t.audience),window.location.assign(r.toString())}function nt(e){return typeof e!="string"||!/^\/ui(\/|\?|$)/.test(e)?"/ui/":e.startsWith(Ze)||e.startsWith(Qe)?Ne:e}async function zt(){let e=new URLSearchParams(window.location.search),t=sessionStorage.getItem(Xe);sessionStorage.removeItem(Xe);let n=null;try{n=t?JSON.parse(t):null}catch{n=null}if(e.get("error"))throw new Error(`sign-in refused: ${e.get("error_description")||e.get("error")}`);if(!n||!e.get("code")||e.get("state")!==n.state)throw new Error("sign-in could not be completed (no pending sign-in in this tab, or its state does not match): sign in again");let s=$e().oidc,a=await fetch(n.token_endpoint,{method:"POST",headers:{"Content-Type":"application/x-www-form-urlencoded",Accept:"application/json"},body:new URLSearchParams({grant_type:"authorization_code",code:e.get("code"),redirect_uri:Ft(),client_id:s?.client_id??"",code_verifier:n.verifier})}),o={};try{o=await a.json()}catch{o={}}if(!a.ok||typeof o.access_token!="string")throw new Error(`the provider refused the code: ${o.error_description||o.error||a.status}`);return Ee(o.access_token),nt(n.return_to)}function Wt(){let e=$e().oidc,[t,n]=k(""),[s,a]=k(""),[o,r]=k(!1),i=async()=>{r(!0),a("");try{await tt(Ne)}catch(f){a(String(f.message||f)),r(!1)}},p=f=>{f.preventDefault();let c=t.trim().replace(/^Bearer\s+/i,"");if(c===""){a("Paste an access token first.");return}if(qt(c)){n(""),a("This token has expired.");return}n(""),Ee(c),B(Ne,{replace:!0})};return u`
    <section class="card sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      ${Pe&&u`<p class="notice" role="status">${Pe}</p>`}
      ${e?.client_id?u`<p>Sign in with your identity provider (${e.issuer}); hxd never sees your password.</p>
            <button type="button" data-testid="sign-in" onClick=${i} disabled=${o}>Sign in with ${Cn(e.issuer)}</button>`:u`<p>No console sign-in is configured for this server: paste an access token for audience
            ${e?.audience??"of this server"}.</p>`}
      <form class="token-form" onSubmit=${p}>
        <label for="token-input">Or paste a bearer token</label>
        <textarea id="token-input" data-testid="token-input" rows="3" autocomplete="off" spellcheck="false"
          value=${t} onInput=${f=>n(f.currentTarget.value)}></textarea>
        <button type="submit" data-testid="token-submit">Use this token</button>
      </form>
      <p class="hint">The token is kept in this tab's memory only: reloading the page asks to sign in again.</p>
      ${s&&u`<p class="error" role="alert">${s}</p>`}
    </section>`}function Cn(e){try{return new URL(e).host}catch{return"the provider"}}var ne=class extends Error{constructor(t,n){let s=n||{};super(s.detail||s.title||`HTTP ${t}`),this.name="ProblemError",this.status=t,this.code=s.code||"",this.title=s.title||`HTTP ${t}`,this.detail=s.detail||"",this.problem=s}};function Vt(e={}){let t={...e},n=ae();return n&&(t.Authorization=`Bearer ${n}`),t}async function Jt(e){let t=null;if((e.headers.get("Content-Type")||"").includes("json"))try{t=await e.json()}catch{t=null}return e.status===401&&Re(),new ne(e.status,t||{title:e.statusText||`HTTP ${e.status}`})}async function R(e,t,{body:n,query:s,headers:a,raw:o,signal:r}={}){let i=t;if(s){let _=new URLSearchParams;for(let[l,m]of Object.entries(s))m!=null&&m!==""&&_.set(l,String(m));let d=_.toString();d&&(i+=(i.includes("?")?"&":"?")+d)}let p=Vt({Accept:"application/json",...a||{}}),f={method:e,headers:p,signal:r};n!==void 0&&(p["Content-Type"]="application/json",f.body=JSON.stringify(n));let c=await fetch(i,f);if(!c.ok)throw await Jt(c);return o?c:c.status===204?null:c.json()}function Tn(e){let t=[],n=e.replace(/\r\n?/g,`
`),s=0;for(;;){let a=n.indexOf(`

`,s);if(a<0)break;let o=n.slice(s,a);s=a+2;let r={id:null,event:"message",data:[]},i=!1;for(let p of o.split(`
`)){if(p===""||p.startsWith(":"))continue;let f=p.indexOf(":"),c=f<0?p:p.slice(0,f),_=f<0?"":p.slice(f+1);if(_.startsWith(" ")&&(_=_.slice(1)),c==="id")r.id=_;else if(c==="event")r.event=_;else if(c==="data")r.data.push(_);else continue;i=!0}i&&t.push(r)}return{frames:t,rest:n.slice(s)}}async function*Kt(e,{lastEventId:t,signal:n}={}){let s=Vt({Accept:"text/event-stream"});t&&(s["Last-Event-ID"]=String(t));let a=await fetch(`/runs/${encodeURIComponent(e)}/events`,{headers:s,signal:n,cache:"no-store"});if(!a.ok)throw await Jt(a);let o=a.body.getReader(),r=new TextDecoder,i="";try{for(;;){let{value:p,done:f}=await o.read();if(f)break;i+=r.decode(p,{stream:!0});let{frames:c,rest:_}=Tn(i);i=_;for(let d of c){if(!d.data.length)continue;let l;try{l=JSON.parse(d.data.join(`
`))}catch{continue}d.id&&!l.cursor&&(l.cursor=d.id),yield l}}}finally{o.releaseLock()}}var Gt=["running","completed","paused","awaiting_input","cancelled","failed"];function st(e){return e!=="running"}function D({error:e}){if(!e)return null;let t=e.title||"Error",n=e.detail||(e.title?"":String(e.message||e));return u`<div class="problem" role="alert" data-testid="problem">
    <strong>${t}</strong>${n?u`: <span>${n}</span>`:null}
    ${e.code?u` <code>${e.code}</code>`:null}
  </div>`}function G({status:e,testid:t}){return e?u`<span class=${"status status-"+e} data-testid=${t}>${e}</span>`:u`<span class="status status-none">no run</span>`}function se({value:e}){return u`<pre class="json">${typeof e=="string"?e:JSON.stringify(e,null,2)}</pre>`}function q(e){return e?`${e.name}@${e.version}`:""}function ge(e){return e==null?"":e<1?`${Math.round(e*1e3)} ms`:e<120?`${(Math.round(e*10)/10).toString()} s`:`${Math.round(e/60)} min`}var Pn=new Intl.DateTimeFormat(void 0,{year:"numeric",month:"short",day:"numeric",hour:"2-digit",minute:"2-digit",second:"2-digit"});function Nn(e){let t=new Date(e);return Number.isNaN(t.getTime())?String(e||""):Pn.format(t)}function L(e){if(!e)return null;let t=new Date(e),n=Number.isNaN(t.getTime())?String(e):t.toISOString();return u`<time datetime=${n} title=${n+" (UTC)"}>${Nn(e)}</time>`}var M=e=>e?new Date(e).getTime():NaN,Xt={running:"running",succeeded:"succeeded",failed:"failed",retrying:"failed, retried",uncertain:"uncertain outcome",awaiting_approval:"awaiting approval",declined:"declined",reset:"reset (attempt_reset)",cancelled:"cancelled",aborted:"aborted"},En={...Xt,retrying:"failed",reset:"reset"},Yt={paused:"paused",resumed:"resumed",cancelled:"cancelled",approval_required:"approval required",approval_given:"approval given",approval_declined:"approval declined",resolved:"resolved",attempt_reset:"attempt reset",failed:"failed",completed:"completed"};function Rn(e,t){let n=M(e.created_at),s=M(e.updated_at);for(let a of e.attempts||[]){let o=M(a.started_at);if(!Number.isNaN(o)){(Number.isNaN(n)||o<n)&&(n=o);let r=a.ended_at?M(a.ended_at):t;a.retry_wait_seconds&&(r+=a.retry_wait_seconds*1e3),(Number.isNaN(s)||r>s)&&(s=r)}}for(let a of e.marks||[]){let o=M(a.at);!Number.isNaN(o)&&(Number.isNaN(s)||o>s)&&(s=o)}return e.status==="running"&&t>s&&(s=t),Number.isNaN(n)&&(n=t),(Number.isNaN(s)||s<=n)&&(s=n+1e3),{lo:n,hi:s,len:s-n}}function An(e){let n=[10,20,50,100,200,500,1e3,2e3,5e3,1e4,3e4,6e4,12e4,3e5,6e5,18e5,36e5].find(a=>e/a<=8)||e/8,s=[];for(let a=0;a<=e;a+=n)s.push(a);return s}function On(e){return e<1e3?`${e} ms`:ge(e/1e3)}function oe(e){return`${e.lane}|${e.step_id}|${e.attempt}|${e.call_id||""}`}function In(e,t){let n=[`${t}, step ${e.step_id}, attempt ${e.attempt}: ${Xt[e.outcome]||e.outcome}`];return e.error&&n.push(`${e.error.type}: ${e.error.message}`),e.started_at&&e.ended_at&&n.push(ge((M(e.ended_at)-M(e.started_at))/1e3)),e.retry_wait_seconds&&n.push(`then waited ${ge(e.retry_wait_seconds)} before retrying`),e.approval&&(e.approval.decided_at?n.push(e.approval.approved?"approved":"declined"):n.push("approval awaited")),n.join("; ")}function Un(e){return e.kind==="model"?"model":e.tool||e.id.replace(/^tool:/,"")}function Ae({timeline:e,onSelect:t,selected:n}){if(!e)return null;let s=Date.now(),{lo:a,len:o}=Rn(e,s),r=d=>`${Math.max(0,Math.min(100,(d-a)/o*100))}%`,i=e.lanes||[],p=e.attempts||[],f=e.marks||[],c=Object.fromEntries(i.map(d=>[d.id,Un(d)])),_=d=>{let l=M(d.started_at),m=d.ended_at?M(d.ended_at):s,w=r(l),$=`max(${Math.max(m-l,0)/o*100}%, 2.2rem)`,S=In(d,c[d.lane]||d.lane),b=oe(d),P=d.retry_wait_seconds?u`<span class="wait" aria-hidden="true" title=${`retry wait ${ge(d.retry_wait_seconds)}`}
      style=${{left:r(m),width:`${d.retry_wait_seconds*1e3/o*100}%`}}></span>`:null,C=d.approval?u`<span class=${"approval"+(d.approval.decided_at?d.approval.approved?" approved":" declined":" awaited")}
      aria-hidden="true" style=${{left:r(M(d.approval.requested_at)),width:`${((d.approval.decided_at?M(d.approval.decided_at):s)-M(d.approval.requested_at))/o*100}%`}}></span>`:null;return u`${C}<button type="button" class=${"bar outcome-"+d.outcome+(n===b?" selected":"")}
        data-testid="bar" data-lane=${d.lane} data-attempt=${String(d.attempt)} data-outcome=${d.outcome} data-step=${d.step_id}
        aria-label=${S} title=${S} aria-pressed=${n===b?"true":"false"}
        style=${{left:w,width:$}} onClick=${()=>t&&t(d)}>
        <span class="bar-text">#${d.attempt}${d.outcome==="succeeded"?"":" "+(En[d.outcome]||d.outcome)}</span>
      </button>${P}`};return u`<div class="timeline" data-testid="timeline">
    <div class="timeline-scroll">
      <div class="timeline-inner" role="grid" aria-label="Run timeline: attempts by lane over time" aria-rowcount=${i.length+2}>
        <div class="lane axis" role="row">
          <div class="lane-name" role="rowheader">time</div>
          <div class="track" role="gridcell">
            ${An(o).map(d=>u`<span class="tick" style=${{left:r(a+d)}}>${On(d)}</span>`)}
          </div>
        </div>
        ${i.map(d=>u`<div class="lane" role="row" data-testid="lane" data-lane=${d.id}>
          <div class="lane-name" role="rowheader" title=${d.id}>${c[d.id]}</div>
          <div class="track" role="gridcell">
            ${p.filter(l=>l.lane===d.id).map(_)}
            ${f.map(l=>u`<span class="mark-line" aria-hidden="true" style=${{left:r(M(l.at))}}></span>`)}
          </div>
        </div>`)}
        <div class="lane marks" role="row">
          <div class="lane-name" role="rowheader">marks</div>
          <div class="track" role="gridcell">
            ${f.map(d=>{let l=`${Yt[d.type]||d.type}${d.step_id?" (step "+d.step_id+")":""}${d.detail?": "+d.detail:""}`;return u`<span role="img" tabindex="0" class=${"mark mark-"+d.type} data-testid="mark" data-type=${d.type}
                style=${{left:r(M(d.at))}} aria-label=${`${l} at ${new Date(d.at).toISOString()}`}
                title=${`${l} — ${new Date(d.at).toISOString()}`}>${Yt[d.type]||d.type}</span>`})}
          </div>
        </div>
      </div>
    </div>
    <ul class="legend" aria-label="Legend">
      <li><span class="swatch outcome-succeeded"></span>succeeded</li>
      <li><span class="swatch outcome-retrying"></span>failed / retried</li>
      <li><span class="swatch wait-swatch"></span>retry wait</li>
      <li><span class="swatch outcome-uncertain"></span>uncertain</li>
      <li><span class="swatch outcome-awaiting_approval"></span>awaiting approval</li>
      <li><span class="swatch outcome-reset"></span>reset</li>
      <li><span class="swatch outcome-running"></span>running</li>
    </ul>
  </div>`}var Z=encodeURIComponent;async function Qt(e){((await R("GET",`/sessions/${Z(e)}/pending`)).items||[]).length===0&&await R("POST",`/sessions/${Z(e)}/resume`,{body:{}})}function Dn({sessionId:e,item:t,onDone:n}){let[s,a]=k(!1),[o,r]=k(null),[i,p]=k(""),f=t.execution_key,c=async m=>{a(!0),r(null);try{await m(),n&&n()}catch(w){r(w)}finally{a(!1)}},_=m=>c(async()=>{await R("POST",`/sessions/${Z(e)}/tools/${Z(f)}/approve`,{body:{allow:m,resume:!1}}),await Qt(e)}),d=(m,w)=>c(async()=>{await R("POST",`/sessions/${Z(e)}/tools/${Z(f)}/resolve`,{body:m}),w&&await Qt(e)}),l=t.status==="approval";return u`<li class="pending card" data-testid="pending-call" data-execution-key=${f}>
    <div><strong>${t.call.name}</strong> <span class="muted">${l?"awaits approval":`outcome ${t.status}`}</span>
      <span class="muted"> · attempt ${t.attempt} · policy ${t.policy}</span></div>
    <details><summary>Input</summary><${se} value=${t.call.input} /></details>
    ${l?u`<div class="buttons">
      <button data-testid="approve" disabled=${s} onClick=${()=>_(!0)}>Approve</button>
      <button data-testid="decline" class="secondary" disabled=${s} onClick=${()=>_(!1)}>Decline</button>
    </div>`:u`<div class="resolve">
      <label for=${"res-"+f}>Verified result</label>
      <textarea id=${"res-"+f} rows="2" value=${i} onInput=${m=>p(m.target.value)}
        placeholder="What the tool did (given to the model as its result)"></textarea>
      <div class="buttons">
        <button data-testid="resolve-result" disabled=${s||!i.trim()}
          onClick=${()=>d({result:{tool_call_id:t.call.id,content:i,is_error:!1}},!0)}>Use this result</button>
        <button data-testid="resolve-retry" class="secondary" disabled=${s} onClick=${()=>d({retry:!0},!0)}>Retry the tool</button>
        <button data-testid="resolve-abort" class="danger" disabled=${s} onClick=${()=>d({abort:!0},!1)}>Abort the run</button>
      </div>
    </div>`}
    <${D} error=${o} />
  </li>`}function Oe({sessionId:e,items:t,onChange:n}){return!t||t.length===0?null:u`<section aria-labelledby="pending-h">
    <h2 id="pending-h">Awaiting a decision</h2>
    <ul class="plain">${t.map(s=>u`<${Dn} key=${s.execution_key} sessionId=${e} item=${s} onDone=${n} />`)}</ul>
  </section>`}function Ie({sessionId:e,status:t,onChange:n}){let[s,a]=k(!1),[o,r]=k(null),i=async f=>{a(!0),r(null);try{await R("POST",`/sessions/${Z(e)}/${f}`,f==="resume"?{body:{}}:{}),n&&n()}catch(c){r(c)}finally{a(!1)}};return u`<div class="controls">
    <div class="buttons">
      <button data-testid="pause" class="secondary" disabled=${s||t!=="running"} onClick=${()=>i("pause")}>Pause</button>
      <button data-testid="resume" class="secondary" disabled=${s||t==="running"||t==="completed"||!t} onClick=${()=>i("resume")}>Resume</button>
      <button data-testid="cancel" class="danger" disabled=${s||!(t==="running"||t==="paused"||t==="awaiting_input")} onClick=${()=>i("cancel")}>Cancel</button>
    </div>
    <${D} error=${o} />
  </div>`}function Ln(e,t){let s=(e.headers.get("Content-Disposition")||"").match(/filename="([^"]+)"/);return s?s[1]:`${t}.hx`}function Zt({runId:e}){let[t,n]=k(!1),[s,a]=k(!1),[o,r]=k(""),[i,p]=k(!1),[f,c]=k(null),[_,d]=k("");return u`<section class="export" aria-labelledby="export-h">
    <h2 id="export-h">Export as .hx</h2>
    <form onSubmit=${async m=>{m.preventDefault(),c(null),d("");let w={include_payloads:t,include_artifacts:s};if(o.trim())try{w.redact=JSON.parse(o)}catch($){c({title:"Redaction rules are not JSON",detail:String($.message||$)});return}p(!0);try{let $=await R("POST",`/runs/${Z(e)}/export`,{body:w,raw:!0,headers:{Accept:"application/vnd.harnessx.incident+zip, application/problem+json"}}),S=await $.blob(),b=Ln($,e),P=URL.createObjectURL(S),C=document.createElement("a");C.href=P,C.download=b,document.body.appendChild(C),C.click(),C.remove(),setTimeout(()=>URL.revokeObjectURL(P),1e4),d(`${b} (${S.size} bytes)`)}catch($){c($)}finally{p(!1)}}}>
      <label class="check"><input type="checkbox" data-testid="export-payloads" checked=${t} onChange=${m=>n(m.target.checked)} /> Include payloads (redacted)</label>
      <label class="check"><input type="checkbox" data-testid="export-artifacts" checked=${s} onChange=${m=>a(m.target.checked)} /> Include artifacts (needs payloads)</label>
      <label for="redact">Redaction rules (JSON array, optional)</label>
      <textarea id="redact" rows="2" value=${o} onInput=${m=>r(m.target.value)}
        placeholder='[{"pattern": "acct-[0-9]+", "replace": "acct-…"}]'></textarea>
      <button data-testid="export" type="submit" disabled=${i}>Export</button>
      ${_?u`<span class="muted" role="status" data-testid="export-done">Saved ${_}</span>`:null}
    </form>
    <${D} error=${f} />
  </section>`}var re=encodeURIComponent;function ot({sessionId:e}){let[t,n]=k(""),[s,a]=k(!0),[o,r]=k(!1),[i,p]=k(null),f=async _=>{if(_.preventDefault(),!!t.trim()){r(!0),p(null);try{let d=await R("POST",`/sessions/${re(e)}/runs`,{body:{message:t,stream:s}});B(`/ui/runs/${re(d.run_id)}`)}catch(d){p(d),r(!1)}}},c=`msg-${e}`;return u`<form class="start-run" data-testid="start-run" onSubmit=${f}>
    <label for=${c}>Message</label>
    <textarea id=${c} data-testid="run-message" rows="3" maxlength="1000000" value=${t}
      onInput=${_=>n(_.target.value)} placeholder="What should the agent do?"></textarea>
    <div class="row">
      <label class="check"><input type="checkbox" data-testid="run-stream" checked=${s} onChange=${_=>a(_.target.checked)} /> Stream the answer</label>
      <button type="submit" data-testid="start-run-submit" disabled=${o||!t.trim()}>Start run</button>
    </div>
    <${D} error=${i} />
  </form>`}function en({id:e}){let[t,n]=k(null),[s,a]=k(null),[o,r]=k([""]),[i,p]=k([]),[f,c]=k(null),_=o.length-1,d=me(async()=>{try{let[m,w,$]=await Promise.all([R("GET",`/sessions/${re(e)}`),R("GET",`/sessions/${re(e)}/runs`,{query:{limit:20,cursor:o[_]}}),R("GET",`/sessions/${re(e)}/pending`)]);n(m),a(w),p($.items||[]),c(null)}catch(m){c(m)}},[e,o]);if(j(()=>{d()},[d]),!t)return u`<section><h1>Session ${e}</h1>${f?u`<${D} error=${f} />`:u`<p class="muted">Loading…</p>`}</section>`;let l=t.latest_run;return u`<section class="session">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/ui/" onClick=${U}>Sessions</a> › ${t.session_id}</nav>
    <h1>Session <code class="id">${t.session_id}</code></h1>
    <dl class="facts">
      <dt>Agent</dt><dd>${q(t.agent)}</dd>
      <dt>Created</dt><dd>${L(t.created_at)}</dd>
      <dt>Recording</dt><dd>${t.recording?"on":"off"}</dd>
      <dt>Latest run</dt><dd>${l?u`<a href=${"/ui/runs/"+re(l.run_id)} onClick=${U}><${G} status=${l.status} /></a>`:u`<${G} />`}</dd>
      <dt>Metadata</dt><dd><${se} value=${t.metadata} /></dd>
    </dl>
    <${D} error=${f} />
    <${Oe} sessionId=${e} items=${i} onChange=${d} />
    ${l?u`<${Ie} sessionId=${e} status=${l.status} onChange=${d} />`:null}
    <section aria-labelledby="runs-h">
      <h2 id="runs-h">Runs</h2>
      <div class="table-wrap"><table data-testid="runs-table">
        <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Output</th></tr></thead>
        <tbody>
          ${s&&s.items.length===0?u`<tr><td colspan="4" class="muted">No runs yet.</td></tr>`:null}
          ${(s?s.items:[]).map(m=>u`<tr data-testid="run-row" data-run-id=${m.run_id}>
            <td><a href=${"/ui/runs/"+re(m.run_id)} onClick=${U}><code>${m.run_id}</code></a></td>
            <td><${G} status=${m.status} /></td>
            <td>${L(m.created_at)}</td>
            <td class="clip">${m.output||""}</td>
          </tr>`)}
        </tbody>
      </table></div>
      <div class="pager">
        <button class="secondary" disabled=${_===0} onClick=${()=>r(o.slice(0,-1))}>Previous</button>
        <button class="secondary" disabled=${!s||!s.next_cursor} onClick=${()=>r([...o,s.next_cursor])}>Next</button>
      </div>
    </section>
    <section aria-labelledby="mcp-h">
      <h2 id="mcp-h">Pinned MCP tools</h2>
      ${t.mcp_tools.length===0?u`<p class="muted">None (the agent has no MCP servers).</p>`:u`<ul class="plain">
        ${t.mcp_tools.map(m=>u`<li><code>${m.name}</code> <span class="muted">${m.server} · ${m.transport}</span> — ${m.description}</li>`)}
      </ul>`}
    </section>
    <section class="card" aria-labelledby="start-h">
      <h2 id="start-h">Start a run</h2>
      <${ot} sessionId=${e} />
    </section>
  </section>`}var Mn=20;function jn(){let e=new URLSearchParams(location.search);return{status:e.get("status")||"",agent:e.get("agent")||""}}function Bn(e){let t=new URLSearchParams;e.status&&t.set("status",e.status),e.agent&&t.set("agent",e.agent);let n=t.toString();B("/ui/"+(n?"?"+n:""),{replace:!0})}function qn(){let[e,t]=k([]);return j(()=>{R("GET","/agents").then(n=>t(n.items||[]),()=>t([]))},[]),e}function Hn({agents:e,onCreated:t}){let[n,s]=k(""),[a,o]=k(""),[r,i]=k(!0),[p,f]=k(!1),[c,_]=k(null);return u`<form class="card new-session" data-testid="new-session" onSubmit=${async l=>{l.preventDefault();let m=e.find(w=>q(w)===(n||q(e[0])));if(m){f(!0),_(null);try{let w={agent:{name:m.name,version:m.version},recording:r};a.trim()&&(w.session_id=a.trim());let $=await R("POST","/sessions",{body:w});o(""),t($)}catch(w){_(w)}finally{f(!1)}}}} aria-labelledby="new-h">
    <h2 id="new-h">New session</h2>
    <div class="row">
      <label>Agent
        <select data-testid="new-session-agent" value=${n||q(e[0])} onChange=${l=>s(l.target.value)}>
          ${e.map(l=>u`<option value=${q(l)}>${q(l)}</option>`)}
        </select>
      </label>
      <label>Session id (optional)
        <input data-testid="new-session-id" value=${a} maxlength="200" onInput=${l=>o(l.target.value)} placeholder="generated" />
      </label>
      <label class="check"><input type="checkbox" checked=${r} onChange=${l=>i(l.target.checked)} /> Record (flight recorder)</label>
      <button type="submit" data-testid="new-session-submit" disabled=${p||e.length===0}>Create session</button>
    </div>
    <${D} error=${c} />
  </form>`}function tn(){let e=qn(),[t,n]=k(jn),[s,a]=k([""]),[o,r]=k(null),[i,p]=k(null),[f,c]=k(null),[_,d]=k(0),l=s.length-1;j(()=>{let $=new AbortController;return p(null),R("GET","/sessions",{query:{limit:Mn,cursor:s[l],status:t.status,agent:t.agent},signal:$.signal}).then(r,S=>{S.name!=="AbortError"&&(p(S),r({items:[],next_cursor:null}))}),()=>$.abort()},[t,s,_]);let m=$=>S=>{let b={...t,[$]:S.target.value};n(b),a([""]),Bn(b)},w=[...new Set(e.map($=>$.name))];return u`<section class="sessions">
    <h1>Sessions</h1>
    <${Hn} agents=${e} onCreated=${$=>{c($),d(S=>S+1)}} />
    ${f?u`<div class="card" aria-labelledby="start-h">
      <h2 id="start-h">Start a run in <a href=${"/ui/sessions/"+encodeURIComponent(f.session_id)} onClick=${U}>${f.session_id}</a></h2>
      <${ot} sessionId=${f.session_id} />
    </div>`:null}
    <form class="filters" role="search" aria-label="Filter sessions" onSubmit=${$=>$.preventDefault()}>
      <label>Status
        <select data-testid="filter-status" value=${t.status} onChange=${m("status")}>
          <option value="">any</option>
          ${Gt.map($=>u`<option value=${$}>${$}</option>`)}
          <option value="none">no run yet</option>
        </select>
      </label>
      <label>Agent
        <select data-testid="filter-agent" value=${t.agent} onChange=${m("agent")}>
          <option value="">any</option>
          ${w.map($=>u`<option value=${$}>${$} (all versions)</option>`)}
          ${e.map($=>u`<option value=${q($)}>${q($)}</option>`)}
        </select>
      </label>
    </form>
    <${D} error=${i} />
    <div class="table-wrap">
      <table data-testid="sessions-table">
        <caption class="sr-only">Your sessions</caption>
        <thead><tr><th scope="col">Session</th><th scope="col">Agent</th><th scope="col">Latest run</th><th scope="col">Created</th></tr></thead>
        <tbody>
          ${o&&o.items.length===0?u`<tr><td colspan="4" class="muted">No sessions${t.status||t.agent?" match these filters":""}.</td></tr>`:null}
          ${(o?o.items:[]).map($=>u`<tr data-testid="session-row" data-session-id=${$.session_id}>
            <td><a href=${"/ui/sessions/"+encodeURIComponent($.session_id)} onClick=${U}>${$.session_id}</a></td>
            <td>${q($.agent)}</td>
            <td>${$.latest_run?u`<a href=${"/ui/runs/"+encodeURIComponent($.latest_run.run_id)} onClick=${U}><${G} status=${$.latest_run.status} /></a>`:u`<${G} />`}</td>
            <td>${L($.created_at)}</td>
          </tr>`)}
        </tbody>
      </table>
    </div>
    <div class="pager">
      <button class="secondary" data-testid="prev-page" disabled=${l===0} onClick=${()=>a(s.slice(0,-1))}>Previous</button>
      <span class="muted">Page ${l+1}</span>
      <button class="secondary" data-testid="next-page" disabled=${!o||!o.next_cursor}
        onClick=${()=>a([...s,o.next_cursor])}>Next</button>
    </div>
  </section>`}var ie=encodeURIComponent,Fn=new Set(["run_result","approval_required","recovery_required","attempt_reset","waiting","tool_call_start","tool_result","turn_complete","text_complete","error"]);async function zn(e,t,n){let s=[];for(let a=0;a<1e3;a++){let o=await R("GET",`/runs/${ie(e)}/events`,{query:{after:t,limit:1e3},signal:n});if(s.push(...o.events||[]),!o.events||o.events.length===0||o.next_cursor===t)break;t=o.next_cursor}return{events:s,after:t}}function Wn(e,t){let n=e.data;return!n||typeof n!="object"?!1:t.call_id&&(n.id===t.call_id||n.tool_call_id===t.call_id||n.call&&n.call.id===t.call_id)?!0:!!(t.execution_key&&n.execution_key===t.execution_key)}function Vn(e,t,n){if(t.kind==="tool")return e.filter(p=>p.step_id===t.step_id&&Wn(p,t));let s=n.filter(p=>p.kind==="model"&&p.step_id===t.step_id).map(p=>Date.parse(p.started_at)).sort((p,f)=>p-f),a=Date.parse(t.started_at),o=s.indexOf(a),r=o<=0?-1/0:a,i=o>=0&&o+1<s.length?s[o+1]:1/0;return e.filter(p=>{if(p.step_id!==t.step_id)return!1;let f=Date.parse(p.created_at);return Number.isNaN(f)?p.attempt_id===String(t.attempt):f>=r&&f<i})}function Jn({runId:e,attempt:t,attempts:n,version:s}){let[a,o]=k(null),[r,i]=k(null),p=Q({runId:"",events:[],after:"0"});j(()=>{let c=new AbortController;i(null),p.current.runId!==e&&(p.current={runId:e,events:[],after:"0"});let _=p.current;return zn(e,_.after,c.signal).then(d=>{c.signal.aborted||(_.events=_.events.concat(d.events),_.after=d.after,o(_.events))},d=>{d.name!=="AbortError"&&i(d)}),()=>c.abort()},[e,s]);let f=a?Vn(a,t,n):[];return u`<section class="bar-detail card" data-testid="bar-detail" aria-live="polite" aria-labelledby="detail-h">
    <h2 id="detail-h">${t.kind==="model"?"Model":`Tool ${t.tool||""}`} · step ${t.step_id} · attempt ${t.attempt}</h2>
    <dl class="facts">
      <dt>Outcome</dt><dd>${t.outcome}</dd>
      <dt>Started</dt><dd>${L(t.started_at)}</dd>
      <dt>Ended</dt><dd>${t.ended_at?L(t.ended_at):"—"}</dd>
      ${t.error?u`<dt>Error</dt><dd>${t.error.type}: ${t.error.message}</dd>`:null}
      ${t.retry_wait_seconds?u`<dt>Retry wait</dt><dd>${t.retry_wait_seconds} s</dd>`:null}
      ${t.model?u`<dt>Model</dt><dd>${t.model}${t.provider?` (${t.provider})`:""}</dd>`:null}
      ${t.execution_key?u`<dt>Execution key</dt><dd><code>${t.execution_key}</code></dd>`:null}
      ${t.replay_policy?u`<dt>Replay policy</dt><dd>${t.replay_policy}</dd>`:null}
      ${t.approval?u`<dt>Approval</dt><dd>requested ${L(t.approval.requested_at)}${t.approval.decided_at?u`, ${t.approval.approved?"approved":"declined"} ${L(t.approval.decided_at)}`:", awaited"}</dd>`:null}
    </dl>
    <${D} error=${r} />
    ${a===null&&!r?u`<p class="muted">Loading events…</p>`:null}
    ${a!==null&&f.length===0?u`<p class="muted">No events of this attempt.</p>`:null}
    <ol class="events">
      ${f.map(c=>u`<li class="event" data-testid="event" data-type=${c.type}>
        <div><strong>${c.type}</strong> <span class="muted">#${c.cursor} · ${L(c.created_at)}</span></div>
        <${se} value=${c.data} />
      </li>`)}
    </ol>
  </section>`}function Kn({usage:e,incomplete:t}){return e?u`<span>${e.input_tokens} in / ${e.output_tokens} out tokens${e.cache_read_input_tokens?`, ${e.cache_read_input_tokens} cache read`:""}${t?" (incomplete)":""}</span>`:null}function nn({id:e}){let[t,n]=k(null),[s,a]=k(null),[o,r]=k([]),[i,p]=k(null),[f,c]=k(null),[_,d]=k(null),[l,m]=k(""),[w,$]=k(0),S=Q(""),b=Q(""),P=Q(0),C=me(async()=>{try{let g=await R("GET",`/runs/${ie(e)}`);n(g),p(null);let[v,x]=await Promise.allSettled([R("GET",`/runs/${ie(e)}/timeline`),R("GET",`/sessions/${ie(g.session_id)}/pending`)]);v.status==="fulfilled"?(a(v.value),c(null)):c(v.reason),r(x.status==="fulfilled"?x.value.items||[]:[]),$(T=>T+1)}catch(g){p(g)}},[e]),H=me(()=>{clearTimeout(P.current),P.current=setTimeout(C,250)},[C]);j(()=>(C(),()=>clearTimeout(P.current)),[C]);let F=!!t&&!st(t.status);if(j(()=>{if(!F)return;let g=new AbortController,v=!1;return(async()=>{let x=500;for(;!v;){let T=!1;try{for await(let h of Kt(e,{lastEventId:S.current,signal:g.signal}))x=500,h.cursor&&(S.current=h.cursor),h.type==="text_delta"?(b.current!==h.step_id&&(b.current=h.step_id,m("")),m(E=>E+(typeof h.data=="string"?h.data:""))):h.type==="attempt_reset"&&h.step_id===b.current&&m(""),Fn.has(h.type)&&H();T=!0}catch(h){if(v||h.name==="AbortError")return;if(h.status&&h.status<500&&h.status!==408&&h.status!==429){p(h);return}}if(v)return;if(T){H();let h=await R("GET",`/runs/${ie(e)}`,{signal:g.signal}).catch(()=>null);if(v||!h||st(h.status))return}await new Promise(h=>setTimeout(h,x)),x=Math.min(x*2,1e4)}})(),()=>{v=!0,g.abort()}},[e,F,H]),i&&!t)return u`<section><h1>Run</h1><${D} error=${i} /></section>`;if(!t)return u`<section><h1>Run</h1><p class="muted">Loading…</p></section>`;let z=s?s.attempts||[]:[],y=_?z.find(g=>oe(g)===_):null;return u`<section class="run">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/ui/" onClick=${U}>Sessions</a> ›
      <a href=${"/ui/sessions/"+ie(t.session_id)} onClick=${U}>${t.session_id}</a> › run</nav>
    <h1>Run <code class="id">${t.run_id}</code></h1>
    <dl class="facts">
      <dt>Status</dt><dd><${G} status=${t.status} testid="run-status" /></dd>
      <dt>Created</dt><dd>${L(t.created_at)}</dd>
      <dt>Updated</dt><dd>${L(t.updated_at)}</dd>
      <dt>Usage</dt><dd><${Kn} usage=${t.usage} incomplete=${t.usage_incomplete} /></dd>
      ${t.stop_reason?u`<dt>Stop reason</dt><dd>${t.stop_reason}</dd>`:null}
    </dl>
    <${D} error=${i} />
    ${t.error?u`<div class="run-error" role="status"><strong>Error</strong> <${se} value=${t.error} /></div>`:null}
    ${F||l?u`<section aria-labelledby="live-h"><h2 id="live-h">${F?"Live":"Last streamed text"}</h2>
      <p class="live-text" data-testid="live-text" aria-live="polite">${l}</p></section>`:null}
    ${t.output!==null&&t.output!==void 0?u`<section aria-labelledby="out-h"><h2 id="out-h">Result</h2>
      <p class="output" data-testid="run-output">${t.output}</p></section>`:null}
    <${Oe} sessionId=${t.session_id} items=${o} onChange=${C} />
    <${Ie} sessionId=${t.session_id} status=${t.status} onChange=${C} />
    <section aria-labelledby="tl-h">
      <h2 id="tl-h">Timeline</h2>
      ${f?u`<${D} error=${f} />`:null}
      <${Ae} timeline=${s} selected=${_} onSelect=${g=>d(oe(g))} />
    </section>
    ${y?u`<${Jn} runId=${e} attempt=${y} attempts=${z} version=${w} />`:null}
    <${Zt} runId=${e} />
  </section>`}var Ue="model",Gn=new Set(["model.started","model.response","model.processed","model.completed","model.failed","model.interrupted"]);var Yn=new Set(["paused","cancelled","failed","completed"]);function De(e){let t=Date.parse(e);return Number.isNaN(t)?0:t}function sn(e){let t=Number.parseInt(e,10);return Number.isFinite(t)&&t>=1?t:1}function J(e){return e!==null&&typeof e=="object"&&!Array.isArray(e)}function rn(e){return e.capture==="present"&&J(e.payload)?e.payload:{}}function rt(e){if(!(typeof e.type!="string"&&typeof e.message!="string"))return{type:String(e.type??""),message:String(e.message??"")}}function an(e,t={}){let n=Array.isArray(e)?e.filter(J):[],s=J(t)?t:{},a=[{id:Ue,kind:"model"}],o=new Set([Ue]),r=[],i=[],p=new Map,f=new Map,c=new Map,_=new Map,d={model:null,tool:null},l=null,m=y=>{let g=`tool:${y}`;return o.has(g)||(o.add(g),a.push({id:g,kind:"tool",tool:y})),g},w=(y,g)=>{let v=c.get(y);return v||(v={tool:null,call_id:y.split(":").pop()},c.set(y,v)),J(g)&&(typeof g.name=="string"&&g.name&&(v.tool=g.name),typeof g.id=="string"&&g.id&&(v.call_id=g.id)),v},$=(y,g,v,x)=>{let T=w(g),h={lane:m(T.tool??T.call_id),kind:"tool",step_id:y.step_id,attempt:v,started_at:x,outcome:"running",tool:T.tool??void 0,call_id:T.call_id,execution_key:g};return T.replay_policy&&(h.replay_policy=T.replay_policy),r.push(h),f.set(`${g}\0${v}`,h),h},S=y=>{let g=null;for(let v of r)v.kind==="tool"&&v.execution_key===y&&(g=v);return g},b=(y,g,v,x)=>{y.ended_at=g,y.outcome=v,x&&(y.error=x)};for(let y of n){let g=y.recorded_at,v=rn(y),x=typeof y.execution_key=="string"?y.execution_key:"",T=sn(y.attempt_id);switch(y.kind){case"model.started":{for(let E of p.values())E.step_id===y.step_id&&E.outcome==="failed"&&(E.outcome="retrying");let h={lane:Ue,kind:"model",step_id:y.step_id,attempt:T,started_at:g,outcome:"running"};typeof v.model=="string"&&v.model&&(h.model=v.model),typeof v.provider=="string"&&v.provider&&(h.provider=v.provider),r.push(h),p.set(`${y.step_id}\0${T}`,h);break}case"model.completed":case"model.failed":case"model.interrupted":{let h=p.get(`${y.step_id}\0${T}`);h||(h={lane:Ue,kind:"model",step_id:y.step_id,attempt:T,started_at:g,outcome:"running"},r.push(h),p.set(`${y.step_id}\0${T}`,h)),y.kind==="model.completed"?b(h,g,"succeeded"):y.kind==="model.failed"?(b(h,g,"failed",rt(v)),d.model=h):b(h,g,"cancelled");break}case"tool.started":{if(!x)break;let h=w(x,v.call);typeof v.replay_policy=="string"&&(h.replay_policy=v.replay_policy);let E=S(x);E&&E.outcome==="failed"&&(E.outcome="retrying");let I=$(y,x,T,g),W=_.get(x);W&&(I.approval=at(W),_.delete(x));break}case"tool.dispatched":x&&w(x,v.call);break;case"tool.returned":{let h=f.get(`${x}\0${T}`)??(x?$(y,x,T,g):null);h&&b(h,g,v.is_error===!0?"failed":"succeeded",v.is_error===!0?{type:"tool_error",message:"the tool returned an error result"}:void 0);break}case"tool.failed":{let h=f.get(`${x}\0${T}`)??(x?$(y,x,T,g):null);if(!h)break;v.outcome==="unknown"?b(h,g,"uncertain",rt(v)):(b(h,g,"failed",rt(v)),d.tool=h);break}case"tool.interrupted":{let h=f.get(`${x}\0${T}`)??(x?$(y,x,T,g):null);h&&b(h,g,v.status==="uncertain"?"uncertain":"cancelled");break}case"tool.resolved":{if(!x)break;let h=_.get(x);if(h&&!h.decided_at){h.decided_at=g,typeof v.allow=="boolean"&&(h.approved=v.allow);let W=v.allow===!1;if(i.push(le(W?"approval_declined":"approval_given",g,y.step_id,x)),W){let V=w(x),ce={lane:m(V.tool??V.call_id),kind:"tool",step_id:h.step_id??y.step_id,attempt:T,started_at:h.requested_at,ended_at:g,outcome:"declined",tool:V.tool??void 0,call_id:V.call_id,execution_key:x,approval:at(h)};r.push(ce),_.delete(x)}break}let E=Xn(v);i.push(le("resolved",g,y.step_id,x,E));let I=S(x);I&&E&&(I.resolution=E,E==="abort"?b(I,I.ended_at??g,"aborted"):E==="result"?b(I,I.ended_at??g,"succeeded"):I.outcome==="running"&&b(I,I.ended_at??g,"uncertain"));break}case"event":{let h=v.type,E=J(v.data)?v.data:{},I=typeof E.execution_key=="string"?E.execution_key:"";if(h==="approval_required"&&I)w(I,E.call),_.set(I,{requested_at:g,step_id:y.step_id}),m(w(I).tool??w(I).call_id),i.push(le("approval_required",g,y.step_id,I));else if(h==="attempt_reset"){let W=sn(String(E.attempt??"")),V=typeof v.step_id=="string"?v.step_id:y.step_id,ce=p.get(`${V}\0${W}`);ce&&ce.outcome==="running"&&b(ce,g,"reset"),i.push(le("attempt_reset",g,V,void 0,String(W)))}else if(h==="waiting"){let W=E.on==="tool"?"tool":"model",V=d[W];V&&typeof E.seconds=="number"&&(V.retry_wait_seconds=E.seconds)}break}case"run.resumed":i.push(le("resumed",g,void 0,void 0,typeof v.previous_status=="string"?`after ${v.previous_status}`:void 0));break;case"checkpoint":{let h=v.status;typeof h=="string"&&h!==l&&(Yn.has(h)&&i.push(le(h,g,void 0,void 0,h==="failed"?Qn(v.error):void 0)),l=h);break}default:}}for(let[y,g]of _){let v=w(y);r.push({lane:m(v.tool??v.call_id),kind:"tool",step_id:g.step_id??"0",attempt:1,started_at:g.requested_at,outcome:"awaiting_approval",tool:v.tool??void 0,call_id:v.call_id,execution_key:y,approval:at(g)})}let P=typeof s.status=="string"?s.status:l??"running",C=n.length?n[n.length-1].recorded_at:void 0;if(P==="cancelled")for(let y of r)(y.outcome==="running"||y.outcome==="awaiting_approval")&&b(y,C,"cancelled");for(let y of r)y.tool===void 0&&delete y.tool,y.ended_at===void 0&&delete y.ended_at;let H=new Map(a.map((y,g)=>[y.id,g])),F=new Map(r.map((y,g)=>[y,g]));r.sort((y,g)=>De(y.started_at)-De(g.started_at)||H.get(y.lane)-H.get(g.lane)||F.get(y)-F.get(g));let z=new Map(i.map((y,g)=>[y,g]));return i.sort((y,g)=>De(y.at)-De(g.at)||z.get(y)-z.get(g)),{run_id:String(s.run_id??n[0]?.run_id??""),session_id:String(s.session_id??n[0]?.session_id??""),status:P,created_at:n[0]?.recorded_at??s.created_at,updated_at:C??s.created_at,lanes:a,attempts:r,marks:i}}function at(e){let t={requested_at:e.requested_at};return e.decided_at&&(t.decided_at=e.decided_at),typeof e.approved=="boolean"&&(t.approved=e.approved),t}function le(e,t,n,s,a){let o={type:e,at:t};return n!==void 0&&(o.step_id=n),s&&(o.execution_key=s),a&&(o.detail=a),o}function Xn(e){if(e.abort===!0)return"abort";if(e.retry===!0)return"retry";if(e.result!==void 0&&e.result!==null)return"result"}function Qn(e){if(typeof e=="string")return e;if(J(e)&&typeof e.message=="string")return e.message}function ln(e,t){if(!Array.isArray(e)||!J(t))return[];let n=String(t.attempt);if(t.kind==="model")return e.filter(r=>{if(!J(r))return!1;if(Gn.has(r.kind))return r.step_id===t.step_id&&r.attempt_id===n;if(r.kind!=="event")return!1;let i=on(r);return!i.key&&!i.callId&&i.step===t.step_id&&i.attempt===n});let s=t.execution_key,a=t.outcome==="declined"||t.outcome==="awaiting_approval",o=t.approval?.decided_at;return e.filter(r=>{if(!J(r)||!s)return!1;if(typeof r.kind=="string"&&r.kind.startsWith("tool."))return r.execution_key===s&&(a||r.attempt_id===n||r.kind==="tool.resolved"&&o!==void 0&&r.recorded_at===o);if(r.kind!=="event")return!1;let i=on(r);return i.key?i.key===s&&(i.type!=="recovery_required"||i.attempt===n||a):i.callId!==""&&i.callId===t.call_id&&i.step===t.step_id&&i.attempt===n})}var Zn=new Set(["tool_call_start","tool_call_complete","tool_result"]);function on(e){let t=rn(e),n=J(t.data)?t.data:{},s="";return Zn.has(t.type)&&(s=String(n.id??n.tool_call_id??"")),{type:t.type,step:typeof t.step_id=="string"?t.step_id:e.step_id,attempt:typeof t.attempt_id=="string"?t.attempt_id:e.attempt_id,key:typeof n.execution_key=="string"?n.execution_key:"",callId:s}}var es="application/vnd.harnessx.incident+zip";async function cn(e,t){let n={Accept:"application/json","Content-Type":es},s=ae();s&&(n.Authorization=`Bearer ${s}`);let a=await fetch(e,{method:"POST",headers:n,body:t});if(!a.ok){let o=null;if((a.headers.get("Content-Type")||"").includes("json"))try{o=await a.json()}catch{o=null}throw a.status===401&&Re(),new ne(a.status,o||{title:a.statusText||`HTTP ${a.status}`})}return a.json()}function dn(){let[e,t]=k({phase:"idle"}),[n,s]=k(null),[a,o]=k(!1),r=Q(null),i=Q(0),p=async _=>{if(!_)return;let d=++i.current;s(null),t({phase:"busy",name:_.name});try{let l=await _.arrayBuffer(),m=await cn("/bundles/verify",l),w=null,$=null;if(m.valid)try{w=await cn("/bundles/playback",l)}catch(b){if(!(b instanceof ne))throw b;$=b}if(d!==i.current)return;let S=w?an(w.records,w.manifest):null;t({phase:"done",name:_.name,size:_.size,report:m,played:w,timeline:S,problem:$})}catch(l){if(d!==i.current)return;t({phase:"error",name:_.name,error:l})}},f=_=>{_.preventDefault(),o(!1),p(_.dataTransfer?.files?.[0])},c=_=>{(_.key==="Enter"||_.key===" ")&&(_.preventDefault(),r.current?.click())};return u`
    <section class="bundles" aria-labelledby="bundles-title">
      <h1 id="bundles-title">Bundle inspector</h1>
      <p>Open a <code>.hx</code> incident bundle to check it and replay its run. The server verifies it and
        plays it back without running anything; nothing is stored.</p>
      <div class=${"drop-zone"+(a?" dragging":"")} data-testid="drop-zone" role="button" tabindex="0"
        aria-label="Drop a .hx bundle here, or press Enter to choose one"
        onKeyDown=${c} onClick=${()=>r.current?.click()}
        onDragOver=${_=>{_.preventDefault(),o(!0)}}
        onDragLeave=${()=>o(!1)} onDrop=${f}>
        Drop a <code>.hx</code> file here, or
        <label class="file-label" onClick=${_=>_.stopPropagation()}>
          choose one
          <input ref=${r} type="file" accept=".hx" data-testid="bundle-input"
            onClick=${_=>_.stopPropagation()}
            onChange=${_=>{p(_.currentTarget.files?.[0]),_.currentTarget.value=""}} />
        </label>
      </div>
      ${e.phase==="busy"&&u`<p role="status">Verifying ${e.name}…</p>`}
      ${e.phase==="error"&&u`<${un} error=${e.error} />`}
      ${e.phase==="done"&&u`<${ts} state=${e} selected=${n} onSelect=${s} />`}
    </section>`}function un({error:e}){return e instanceof ne?u`<div class="problem" role="alert" data-testid="problem">
      <strong>${e.title}</strong>${e.detail?u`: ${e.detail}`:""}</div>`:u`<div class="problem" role="alert" data-testid="problem">${String(e?.message??e)}</div>`}function ts({state:e,selected:t,onSelect:n}){let{report:s,played:a,timeline:o,problem:r}=e,i=a?.records??[],p=t&&o?o.attempts.find(f=>oe(f)===t):null;return u`
    <section class="card" aria-labelledby="report-title">
      <h2 id="report-title">Verification of ${e.name}</h2>
      <p data-testid="verify-summary" class=${"verdict "+(s.valid?"ok":"bad")}>
        ${s.valid?"valid":"invalid"}, ${s.complete?"complete":"incomplete"}
        ${s.valid?` — ${s.record_count} records`:""}
      </p>
      ${s.signature&&u`<p data-testid="verify-signature" data-status=${s.signature.status}
        class=${"verdict signature "+(s.signature.status==="valid"?"ok":"bad")}>${ns(s.signature)}</p>`}
      ${s.issues.length>0&&u`
        <ol class="issues">
          ${s.issues.map((f,c)=>u`<${ss} key=${c} issue=${f}
            details=${(s.details??[]).filter(_=>_.issue===f)} records=${i} />`)}
        </ol>`}
      ${r&&u`<${un} error=${r} />`}
    </section>
    ${a&&u`
      <${rs} manifest=${a.manifest} />
      <section aria-labelledby="timeline-title">
        <h2 id="timeline-title">Timeline</h2>
        ${o.attempts.length===0?u`<p>No model or tool attempt is recorded in this bundle.</p>`:u`<${Ae} timeline=${o} onSelect=${f=>n(oe(f))} selected=${t} />`}
        ${p&&u`<${as} attempt=${p} records=${ln(i,p)} />`}
      </section>
      <${is} manifest=${a.manifest} artifacts=${a.artifacts} />`}`}function ns({status:e,kid:t}){switch(e){case"valid":return`signed by this server (key ${t})`;case"invalid":return"signature invalid: the bundle was changed after it was signed";case"unknown_key":return`signed by a key this server does not know (${t})`;default:return"not signed"}}function ss({issue:e,details:t,records:n}){return u`<li data-testid="verify-issue">
    <span class="issue-message">${e}</span>
    ${t.length>0&&u`<ul class="issue-details">
      ${t.slice(0,50).map((s,a)=>u`<li key=${a}>${os(s,n)}</li>`)}
      ${t.length>50&&u`<li>… ${t.length-50} more</li>`}
    </ul>`}
  </li>`}function os(e,t){let n=[];if(e.message&&n.push(e.message),e.member&&n.push(`member ${e.member}`),e.seq){let s=t[e.seq-1];n.push(`record ${e.seq}`+(s&&typeof s.id=="string"?` (id ${s.id})`:""))}return e.kind&&n.push(`kind ${e.kind}`),e.step_id!==void 0&&n.push(`step ${e.step_id}`),e.attempt_id!==void 0&&n.push(`attempt ${e.attempt_id}`),e.execution_key&&n.push(`call ${e.execution_key}`),n.join(", ")}function rs({manifest:e}){let t=e??{},n=t.agent&&typeof t.agent=="object"?`${t.agent.name}@${t.agent.version}`:"—";return u`<section class="card" aria-labelledby="manifest-title">
    <h2 id="manifest-title">Run</h2>
    <dl class="facts">
      <dt>Run</dt><dd><code>${t.run_id}</code></dd>
      <dt>Session</dt><dd><code>${t.session_id}</code></dd>
      <dt>Agent</dt><dd>${n}</dd>
      <dt>Status</dt><dd>${t.status} (phase ${t.phase})</dd>
      <dt>Exported</dt><dd>${t.created_at?L(t.created_at):"—"}</dd>
    </dl>
  </section>`}function as({attempt:e,records:t}){let n=e.kind==="model"?"model":e.tool??e.call_id;return u`<section class="card bar-detail" data-testid="bar-detail" aria-label="Records of the selected attempt" tabindex="-1">
    <h3>${n}, step ${e.step_id}, attempt ${e.attempt}: ${e.outcome}</h3>
    ${t.length===0?u`<p>No record of this attempt.</p>`:u`
      <ol class="records plain">
        ${t.map(s=>u`<li key=${s.seq} data-testid="record" data-kind=${s.kind}>
          <div><strong>${s.kind==="event"&&s.payload?.type?`event ${s.payload.type}`:s.kind}</strong> · record ${s.seq} · ${L(s.recorded_at)}
            ${s.capture!=="present"?u` · payload ${s.capture}`:""}</div>
          ${s.payload!==null&&u`<pre class="json">${JSON.stringify(s.payload,null,2)}</pre>`}
        </li>`)}
      </ol>`}
  </section>`}function is({manifest:e,artifacts:t}){let n=new Map((t??[]).map(o=>[o.sha256,o.size])),s=e?.artifacts&&typeof e.artifacts=="object"?e.artifacts:{},a=[...new Set([...Object.keys(s),...n.keys()])].sort();return u`<section aria-labelledby="artifacts-title">
    <h2 id="artifacts-title">Artifacts</h2>
    ${a.length===0?u`<p>The run references no artifact.</p>`:u`
      <div class="table-wrap"><table class="artifacts">
        <thead><tr><th scope="col">SHA-256</th><th scope="col">Status</th><th scope="col">Size</th></tr></thead>
        <tbody>
          ${a.map(o=>u`<tr key=${o} data-testid="artifact" data-sha256=${o}>
            <td><code>${o}</code></td>
            <td>${s[o]?.status??"included"}${s[o]?.reason?` (${s[o].reason})`:""}</td>
            <td>${n.has(o)?`${n.get(o)} bytes`:"—"}</td>
          </tr>`)}
        </tbody>
      </table></div>`}
  </section>`}function ls(e){try{let t=e.split(".")[1].replace(/-/g,"+").replace(/_/g,"/"),n=JSON.parse(atob(t+"===".slice((t.length+3)%4)));return n.name||n.preferred_username||n.sub||"signed in"}catch{return"signed in"}}function cs({path:e}){let t=ae();if(t){let n=()=>{Ee(""),B("/ui/sign-in")};return u`<div class="account"><span data-testid="signed-in-as">${ls(t)}</span>
      <button class="link" data-testid="sign-out" onClick=${n}>Sign out</button></div>`}return $e().oidc?u`<div class="account"><button data-testid="sign-in" onClick=${()=>tt(e)}>Sign in</button></div>`:null}function ds(){let[e,t]=k("");return j(()=>{zt().then(n=>B(n||"/ui/",{replace:!0}),n=>t(String(n.message||n)))},[]),e?u`<p class="problem" role="alert" data-testid="problem">${e}</p>`:u`<p>Signing in…</p>`}function us({route:e}){switch(e.name){case"sessions":return u`<${tn} />`;case"session":return u`<${en} key=${e.params.id} id=${e.params.id} />`;case"run":return u`<${nn} key=${e.params.id} id=${e.params.id} />`;case"bundles":return u`<${dn} />`;case"callback":return u`<${ds} />`;case"sign-in":return u`<${Wt} />`;default:return u`<section><h1>Not found</h1><p>No console page here. <a href="/ui/" onClick=${U}>Sessions</a></p></section>`}}function ps(){let e=Dt(),t=Lt(e),n=s=>t.name===s||s==="sessions"&&(t.name==="session"||t.name==="run")?"page":void 0;return u`<div class="layout">
    <header class="top">
      <a class="brand" href="/ui/" onClick=${U}>hxd</a>
      <nav aria-label="Main">
        <a href="/ui/" onClick=${U} aria-current=${n("sessions")}>Sessions</a>
        <a href="/ui/bundles" onClick=${U} aria-current=${n("bundles")}>Bundles</a>
      </nav>
      <${cs} path=${e} />
    </header>
    <main id="main"><${us} route=${t} /></main>
  </div>`}yt(u`<${ps} />`,document.getElementById("app"));
